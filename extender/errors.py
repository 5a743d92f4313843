"""The extender's exceptions; the route handlers map each to the verb's error shape.

Infeasible nodes are verdicts (`extender.model.Verdict`), never exceptions.
"""

from __future__ import annotations


class ExtenderError(Exception):
    """Base class. `status` is the HTTP status used where the contract allows one."""

    status = 500
    retriable = False


class BadRequest(ExtenderError):
    """The body is not JSON of the verb's shape, or a field has the wrong type."""

    status = 400


class BodyTooLarge(BadRequest):
    status = 413


class UnknownGPU(ExtenderError):
    """A node's GPU product is not in the catalogue."""

    status = 422


class StoreUnavailable(ExtenderError):
    """Redis cannot be reached: the scheduler should retry (annotated pods only)."""

    status = 503
    retriable = True


class StoreRefused(StoreUnavailable):
    """Redis refused an operation (a key of another type, written by hand): retried like an
    outage until an operator removes it; never a crash."""


class NotReplicated(StoreUnavailable):
    """A placement's writes did not reach the replicas a failover must find them on (a
    replica down, or a failover under way): undone where it can be, and retried."""


class Conflict(ExtenderError):
    """The reservation cannot be made: no GPU on the node has room any more."""

    status = 409
    retriable = True


class BindFailed(ExtenderError):
    """The Kubernetes API refused or failed the Binding."""

    status = 502
    retriable = True


class InternalError(ExtenderError):
    """A failure no other class names (a defect): answered in the verb's shape as a
    retriable error, logged with its traceback."""

    status = 500
    retriable = True
