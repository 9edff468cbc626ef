"""``taskcost demo``: a simulated fleet of agents, run through the real SDK and the real ``openai`` and ``anthropic``
clients against the fake model server (``fake_llm``), into a ``taskcost serve`` of its own.

``fake_llm`` needs the standard library only; ``models`` (the simulated endpoints) too; ``fleet`` needs the demo extra
(``pip install 'taskcost[demo]'``: taskcost-sdk, openai, anthropic).
"""
