"""Tools that inspect the test suite itself (not tests; run with ``python -m tests.tools.<name>``)."""
