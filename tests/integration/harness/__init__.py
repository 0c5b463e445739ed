"""The integration suite's helpers, by theme; conftest.py re-exports them all
(tests/README's map says what each holds)."""
