"""The compiled part of taskcost: the OTLP wire reader (Cython). Everything else is in pyproject.toml.

Optional: where it cannot be compiled (no C compiler), the install goes on and the normaliser reads requests through
protobuf's messages instead (taskcost/normalize/_wire_py.py): the same records, more slowly."""

from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = cythonize(
    [Extension("taskcost.normalize._wire", ["taskcost/normalize/_wire.pyx"])],
    compiler_directives={"language_level": "3"},
)
for extension in extensions:
    extension.optional = True  # (cythonize makes new Extensions: set on them)

setup(ext_modules=extensions)
