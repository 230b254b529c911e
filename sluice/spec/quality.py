"""The spec's ``expectations:``: rules each row must meet, and what a violation does."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    field_validator,
)

from sluice.spec.common import NAME_PATTERN, OnViolation, _Model


class Expectation(_Model):
    """A rule every transformed row should meet, checked on each micro-batch before it is committed."""

    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=100)]
    """Names the rule in the run summary, the ledger and the quarantine table's ``expectation`` column;
    unique within the spec."""
    rule: str
    """A Spark SQL boolean over the transformed row, e.g. ``amount > 0``. NULL counts as a violation."""
    on_violation: OnViolation = "warn"
    """``warn``: count and keep the row; ``drop``: count and leave it out; ``quarantine``: move it to the
    quarantine table; ``fail``: fail the run before the batch is committed (the checkpoint stays put)."""

    @field_validator("rule")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a Spark SQL boolean is required, e.g. rule: \"amount > 0\"")
        return value.strip()
