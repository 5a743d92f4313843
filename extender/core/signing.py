"""Signatures on the reservation the extender writes on a pod at bind. Pure.

The monitor rebuilds Redis from those annotations; anyone who can edit a pod
can edit them too. An HMAC-SHA256 over what the reservation claims (pod UID,
node, GPU index, reserved MiB, predicted seconds), keyed by a secret only the
extender and the monitor hold, lets the monitor adopt exactly what the
extender wrote and nothing a user forged.
"""

from __future__ import annotations

import hashlib
import hmac


def reservation_signature(key: bytes, uid: str, node: str, gpu: str, reserved_mib: str,
                          predicted_s: str) -> str:
    """Hex HMAC-SHA256 over the reservation's fields as written on the pod."""
    message = "\x1f".join((uid, node, gpu, reserved_mib, predicted_s)).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def is_signed(key: bytes, signature: str, uid: str, node: str, gpu: str, reserved_mib: str,
              predicted_s: str) -> bool:
    """True when `signature` is the extender's over exactly these fields (constant time)."""
    expected = reservation_signature(key, uid, node, gpu, reserved_mib, predicted_s)
    return isinstance(signature, str) and hmac.compare_digest(expected, signature)
