"""Local services for development and tests (``make stack``, ``make s3-up``, ``make kafka-up``): tooling that
imports the product and that the product never imports. Their ``sluice`` sub-commands come in through the
``sluice.commands`` entry points (pyproject.toml)."""
