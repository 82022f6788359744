"""The per-user directory of a netd that does not run as root (netd.config.files.per_user_dir): in a
shared /tmp, anyone can make ``netd-<uid>`` first; it must be this user's, private, and not a link."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from netd.config.files import per_user_dir
from netd.errors import ConfigError

ME = os.getuid()


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path


def test_made_private_when_missing(base: Path) -> None:
    path = per_user_dir("XDG_RUNTIME_DIR", ME)
    st = os.lstat(path)
    assert path == base / f"netd-{ME}" and stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == ME
    assert per_user_dir("XDG_RUNTIME_DIR", ME) == path  # found again, as it is


def test_the_temporary_directory_without_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # tempfile caches its choice: choose again
    assert per_user_dir("XDG_STATE_HOME", ME) == tmp_path / f"netd-{ME}"


def test_ours_but_readable_by_others_is_closed(base: Path) -> None:
    # what an older netd left: made with the umask's mode; nobody else could write into it
    ours = base / f"netd-{ME}"
    ours.mkdir()
    ours.chmod(0o755)
    assert per_user_dir("XDG_RUNTIME_DIR", ME) == ours
    assert stat.S_IMODE(os.lstat(ours).st_mode) == 0o700


@pytest.mark.parametrize("made_by_someone_else", ["open to all", "a link", "a file", "another owner"])
def test_a_name_taken_first_is_refused(base: Path, made_by_someone_else: str) -> None:
    planted = base / f"netd-{ME}"
    if made_by_someone_else == "open to all":  # ours, but anyone could have put a socket in it
        planted.mkdir()
        planted.chmod(0o1777)
        why = "writable by others (mode 1777)"
    elif made_by_someone_else == "a link":
        (base / "elsewhere").mkdir(mode=0o700)
        planted.symlink_to(base / "elsewhere")
        why = "a link"
    elif made_by_someone_else == "a file":
        planted.write_text("")
        why = "not a directory"
    else:
        if ME != 0:
            pytest.skip("only root can give a directory to another user")
        planted.mkdir(mode=0o700)
        os.chown(planted, 65534, 65534)
        why = "owned by uid 65534"
    with pytest.raises(
        ConfigError, match=re.escape(f"{planted} is {why}, not a private directory of uid {ME}")
    ):
        per_user_dir("XDG_RUNTIME_DIR", ME)


def test_a_base_that_cannot_be_written_is_an_error(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base / "missing" / "deeper"))
    with pytest.raises(ConfigError, match="cannot make netd's directory .*missing/deeper/netd-"):
        per_user_dir("XDG_RUNTIME_DIR", ME)
