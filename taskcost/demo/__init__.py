"""``taskcost demo``: a simulated fleet of agents, run through the real SDK and the real ``openai`` and ``anthropic``
clients against the fake model server (``fake_llm``), into a ``taskcost serve`` of its own.

``fake_llm`` needs the standard library only; ``endpoints`` and ``models`` (the simulated endpoints, and the vLLM
deployments' metrics pages) prometheus-client too, and OpenTelemetry's SDK when the deployments send their server
spans; ``fleet`` needs the demo extra (``pip install 'taskcost[demo]'``: taskcost-sdk, openai, anthropic).
"""
