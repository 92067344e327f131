"""The controller's notices stay bounded, and a reader gets exactly the new ones."""

from __future__ import annotations

from heet_tui.control.notices import KEEP, Notices


def test_notices_keep_the_latest_and_count_every_one() -> None:
    notices = Notices()
    notices.append("a")
    notices += ["b", "c"]
    assert notices.since(0) == ["a", "b", "c"] and notices.since(1) == ["b", "c"] and notices.since(3) == []
    seen = notices.total
    for n in range(3 * KEEP):  # a month of plans under auto-approve
        notices.append(f"plan #{n}")
    assert len(notices) == KEEP and notices.total == 3 + 3 * KEEP
    assert notices[-1] == f"plan #{3 * KEEP - 1}" and notices[0] == f"plan #{2 * KEEP}"
    assert notices.since(seen) == list(notices), "the trimmed ones are gone; the kept ones all come"
    assert notices.since(notices.total - 2) == [f"plan #{3 * KEEP - 2}", f"plan #{3 * KEEP - 1}"]
