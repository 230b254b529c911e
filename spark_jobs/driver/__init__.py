"""The driver shell: the request in, the session, the run as code passes it, its errors and progress, the summary out."""
