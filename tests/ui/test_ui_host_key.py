"""First contact: a host with an unknown key opens a dialog with its fingerprint; trust posts the intent."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.widgets import Static
from ui_fakes import FINGERPRINT, host, small_snapshot
from ui_support import SIZE, footer, run, wait_for

from heet_tui.core.host import HostState
from heet_tui.core.intents import TrustHostKey
from heet_tui.ui.dialogs.host_key import HostKeyDialog, fingerprint_in


def with_new_host(snap):
    newcomer = host("gpu-new", "A100", 8, {}, state=HostState.HOST_KEY_UNKNOWN,
                    message=f"host key not known: ssh-ed25519 {FINGERPRINT}")
    return replace(snap, hosts=(*snap.hosts, newcomer))


def test_unknown_key_asks_once_and_trust_posts_the_fingerprint(make_app, backend):
    backend.current = with_new_host(small_snapshot())

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, HostKeyDialog))
            assert FINGERPRINT in str(app.screen.query_one("#fingerprint", Static).render())
            assert "ssh_host_ed25519_key.pub)." in app.export_screenshot(), "the advice wraps, not cut off"
            await pilot.click("#no")
            await wait_for(pilot, lambda: not isinstance(app.screen, HostKeyDialog))
            backend.push(with_new_host(small_snapshot(1)))  # same key again: not asked twice
            await pilot.pause(0.1)
            assert not isinstance(app.screen, HostKeyDialog) and backend.posted == []
            table = app.screen.query_one("#hosts")
            table.select_key("gpu-new")
            await pilot.press("k")  # but the user can come back to it
            await wait_for(pilot, lambda: isinstance(app.screen, HostKeyDialog))
            await pilot.click("#yes")
            await wait_for(pilot, lambda: backend.posted)
            assert backend.posted == [TrustHostKey("gpu-new", FINGERPRINT)]
            assert "k Trust key" in footer(app)
            trusted = with_new_host(small_snapshot(2))
            backend.push(replace(trusted, hosts=tuple(replace(h, state=HostState.READY, message="ready")
                                                      if h.name == "gpu-new" else h for h in trusted.hosts)))
            await wait_for(pilot, lambda: "k Trust key" not in footer(app))

    run(scenario())


def test_the_question_closes_when_the_key_is_trusted_elsewhere(make_app, backend):
    # Trusted with `heet-tui hosts trust` while the dialog was up: it stayed, and took the keys
    # ("2", "x") meant for the screen under it.
    backend.current = with_new_host(small_snapshot())

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, HostKeyDialog))
            trusted = with_new_host(small_snapshot(1))
            backend.push(replace(trusted, hosts=tuple(replace(h, state=HostState.READY, message="ready")
                                                      if h.name == "gpu-new" else h for h in trusted.hosts)))
            await wait_for(pilot, lambda: not isinstance(app.screen, HostKeyDialog))
            assert backend.posted == [], "closed, not answered"
            await pilot.press("2")
            await wait_for(pilot, lambda: app.current_mode == "jobs")

    run(scenario())


def test_read_only_never_offers_to_trust(make_app, backend):
    backend.current = with_new_host(small_snapshot())

    async def scenario():
        app = make_app("cluster", read_only=True)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.latest is not None)
            await pilot.pause(0.1)
            assert not isinstance(app.screen, HostKeyDialog)

    run(scenario())


def test_fingerprint_parsing():
    assert fingerprint_in(f"unknown key {FINGERPRINT} (ed25519)") == FINGERPRINT
    assert fingerprint_in("connection refused") is None


@pytest.mark.parametrize(("name", "state", "message", "said"), [
    ("gpu-new", HostState.HOST_KEY_UNKNOWN, f"unknown host key {FINGERPRINT} for [10.0.0.7]:2222; verify it, then "
     "trust it (heet-tui hosts trust gpu-new)", "First contact with gpu-new: its host key is not known yet."),
    ("node2", HostState.HOST_KEY_UNKNOWN, f"via jump gw: unknown host key {FINGERPRINT} for [10.0.0.7]:2222; verify "
     "it, then trust it (heet-tui hosts trust node2)", "First contact with the jump host gw on the way to node2"),
    ("node3", HostState.HOST_KEY_CHANGED, f"HOST KEY CHANGED for [10.0.0.7]:2222: it now presents {FINGERPRINT}, "
     "which differs from /k; check with the host's admin before trusting it", "the host key of node3 has CHANGED"),
    ("node4", HostState.HOST_KEY_CHANGED, f"via jump gw: HOST KEY CHANGED for [10.0.0.7]:2222: it now presents "
     f"{FINGERPRINT}, which differs from /k; check with the host's admin before trusting it",
     "the host key of the jump host gw on the way to node4 has CHANGED"),
])
def test_first_contact_names_whose_key_and_the_address_without_repeating_the_message(make_app, backend, name, state,
                                                                                     message, said):
    newcomer = host(name, "A100", 8, {}, state=state, message=message)
    backend.current = replace(small_snapshot(), hosts=(*small_snapshot().hosts, newcomer))

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, HostKeyDialog))
            shot = app.export_screenshot().replace("&#160;", " ")
            assert said in shot and "Offered by [10.0.0.7]:2222." in shot
            assert ("trusted before is in /k" in shot) is (state is HostState.HOST_KEY_CHANGED)
            assert "hosts trust" not in shot and shot.count(FINGERPRINT) == 1

    run(scenario())


def test_a_reconnect_attempt_leaves_the_question_open(make_app, backend):
    """The supervisor's retries show the host connecting, or unreachable while its jump host is
    down: that closed the question a second after it opened ("settled elsewhere"), and it was
    never asked again."""
    backend.current = with_new_host(small_snapshot())

    def gpu_new(version: int, state: HostState, message: str):
        snap = with_new_host(small_snapshot(version))
        return replace(snap, hosts=tuple(replace(h, state=state, message=message) if h.name == "gpu-new" else h
                                         for h in snap.hosts))

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, HostKeyDialog))
            asked = app.screen
            for step, snap in enumerate((gpu_new(1, HostState.CONNECTING, "connecting"),
                                         gpu_new(2, HostState.UNREACHABLE, "via jump gw: connection refused"),
                                         with_new_host(small_snapshot(3))), start=1):  # the same key again
                backend.push(snap)
                await wait_for(pilot, lambda step=step: app.latest is not None and app.latest.now == 100.0 + step)
                await pilot.pause(0.05)
                assert app.screen is asked, f"the same question, still open ({snap.hosts[-1].state})"
            backend.push(gpu_new(4, HostState.AUTH_FAILED, "permission denied"))  # past the key check
            await wait_for(pilot, lambda: not isinstance(app.screen, HostKeyDialog))
            assert backend.posted == []

    run(scenario())


def test_a_new_key_waits_for_an_open_form_to_close(make_app, backend, tmp_path):
    """Asked over the Add host form, the question took the form's keys: what was typed was lost,
    and the form's Tab and Enter trusted a key nobody had read."""
    from hosts_support import hosts_copy, open_add_form

    backend.current = small_snapshot()

    async def scenario():
        app = make_app("hosts", hosts_path=hosts_copy(tmp_path))
        async with app.run_test(size=SIZE) as pilot:
            form = await open_add_form(pilot, app)
            backend.push(with_new_host(small_snapshot(1)))
            await wait_for(pilot, lambda: app.latest is not None and app.latest.now == 101.0)
            await pilot.pause(0.1)
            assert app.screen is form, "the form keeps the keyboard"
            await pilot.press("escape")
            backend.push(with_new_host(small_snapshot(2)))
            await wait_for(pilot, lambda: isinstance(app.screen, HostKeyDialog))  # asked once the form is gone
            assert backend.posted == []

    run(scenario())


def test_a_jump_hosts_key_trusted_for_one_host_is_not_asked_again_for_the_next(make_app, backend):
    """Two hosts behind one jump host both ask about its key; trusting it for the first asked
    again for the second (still waiting out its reconnect backoff), with the same fingerprint."""
    def behind_the_jump(snap):
        said = f"First contact with the jump host gate on the way to {{}}: ssh-ed25519 {FINGERPRINT}"
        return replace(snap, hosts=(*snap.hosts, *(host(name, "A100", 8, {}, state=HostState.HOST_KEY_UNKNOWN,
                                                          message=said.format(name)) for name in ("n1", "n2"))))

    backend.current = behind_the_jump(small_snapshot())

    async def scenario():
        app = make_app("cluster")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, HostKeyDialog))
            first = app.screen.host
            await pilot.click("#yes")
            await wait_for(pilot, lambda: backend.posted)
            backend.push(behind_the_jump(small_snapshot(1)))  # the other host has not looked again yet
            await pilot.pause(0.2)
            assert not isinstance(app.screen, HostKeyDialog), f"asked again for {app.screen.host}"
            assert backend.posted == [TrustHostKey(first, FINGERPRINT)]

    run(scenario())
