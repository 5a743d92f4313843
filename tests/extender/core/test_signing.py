"""Reservation signatures: the extender's own values verify, any edit does not."""

from extender.core.binding import pod_annotations
from extender.core.signing import is_signed, reservation_signature
from extender.model import GPU, PREDICTED_S, RESERVED_MIB, SIGNATURE, Need, Reservation

KEY = b"0123456789abcdef-key"


def test_bind_signs_what_it_writes_and_any_edit_breaks_the_signature() -> None:
    written = pod_annotations(Reservation("uid-1", "gpu-0", 1, True), Need(9736.4, 161.04), KEY)
    fields = (written[GPU], written[RESERVED_MIB], written[PREDICTED_S])
    assert fields == ("1", "9736", "161.0")
    assert is_signed(KEY, written[SIGNATURE], "uid-1", "gpu-0", *fields)
    assert not is_signed(KEY, written[SIGNATURE], "uid-1", "gpu-0", "1", "1", "161.0")  # mib
    assert not is_signed(KEY, written[SIGNATURE], "uid-2", "gpu-0", *fields)  # another pod
    assert not is_signed(KEY, written[SIGNATURE], "uid-1", "gpu-9", *fields)  # another node
    assert not is_signed(b"another-key-of-16-bytes", written[SIGNATURE], "uid-1", "gpu-0", *fields)
    assert not is_signed(KEY, None, "uid-1", "gpu-0", *fields)  # type: ignore[arg-type]
    # Field boundaries are unambiguous: moving a character from one field to the next differs.
    assert reservation_signature(KEY, "a", "bc", "1", "2", "3") != reservation_signature(
        KEY, "ab", "c", "1", "2", "3")
    assert SIGNATURE not in pod_annotations(Reservation("u", "n", 0, True), Need(1, 1))
