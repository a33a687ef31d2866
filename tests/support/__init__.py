"""What the suite and the benchmarks share: drivers, builders, the one condition wait.

The rule: a test module imports the product, ``tests.support`` and
``tests.fixtures`` (and gets fixtures from conftest.py), never another test
module and never ``scripts/``; a script may import ``tests.support``, never a
test module. tests/unit/node/test_suite_layout.py enforces it.

- ``wait``: ``wait_until`` / ``wait_until_async``, instead of sleeps
- ``tools``: a missing tool skips locally and fails under ``CI=true``
- ``net``: in-process libp2p nodes, listings, a mesh (tests and net benchmarks)
- ``market``: a seller and a buyer ``NodeService`` on an in-process chain
- ``devnet``: a real devnet of node processes, and the market steps on it
- ``fault_node``: ``python -m tests.support.fault_node FAULT -- <crystalmesh args>``
- ``cli``: the ``crystalmesh`` CLI in-process against a temporary data dir
- ``local_http``: a local HTTP stub server (the faked LLM endpoint)
- ``retrieval``: the retrieval evaluation harness (tests and bench_retrieval.py)
- ``search_baseline``: main's search frozen before the light rows (a baseline only)
"""
