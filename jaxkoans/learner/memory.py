"""Remembered results: a koan is not run again until something it depends on changes.

A file's results are keyed by its chapter's data, the harness, csrc/, the installed versions and
the file; each koan also by the file without the other koans' lines, so an edit inside one koan
leaves the others of its file remembered.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import sys
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import Course, koan_model
from jaxkoans.learner import state
from jaxkoans.plugin.results import KoanResult, KoanState

STORE = "results.json"
LAST = "last.json"  # the koan that passed last: `diff` with no argument shows it
SCHEMA = 2  # 2: a key per koan
PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "pytest")


def _digest_files(paths: list[Path], digest):
    for path in sorted(p for p in paths if p.is_file()):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest


def environment(root: Path) -> str:
    """What every koan's result depends on besides its own file (read once per Memory)."""
    digest = hashlib.sha256(sys.version.encode())
    for name in PACKAGES:
        try:
            digest.update(f"{name}={importlib.metadata.version(name)}".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{name}=-".encode())
    return _digest_files(harness_files(root), digest).hexdigest()


def harness_files(root: Path) -> list[Path]:
    """Every module of jaxkoans/, and the course's csrc/ and pytest configuration."""
    harness = [*Path(__file__).resolve().parents[1].rglob("*.py"), *(root / "csrc").rglob("*")]
    return harness + [root / n for n in course.HARNESS_FILES]


def file_key(environment: str, test_file: Path) -> str:
    manifest = test_file.parent / course.MANIFEST
    return _digest_files([test_file, manifest], hashlib.sha256(environment.encode())).hexdigest()


def koan_keys(environment: str, test_file: Path) -> dict[str, str]:
    """Each koan of `test_file` -> what `file_key` covers but the other koans' lines ({} when the
    file does not parse)."""
    model = koan_model.read(test_file)
    if model.tree is None:
        return {}
    base = _digest_files([test_file.parent / course.MANIFEST], hashlib.sha256(environment.encode()))
    keys = {}
    for koan in model.koans:
        others = [k.span for k in model.koans if k.name != koan.name]
        kept = [
            line
            for number, line in enumerate(model.lines, 1)
            if not any(start <= number <= end for start, end in others)
        ]
        digest = base.copy()
        digest.update("\n".join(kept).encode())
        keys[koan.name] = digest.hexdigest()
    return keys


@dataclass
class Memory:
    root: Path  # the course's
    files: dict[str, dict] = field(default_factory=dict)  # path -> {key, koans, keys, problem}
    _keys: dict[str, str] = field(default_factory=dict, repr=False)
    _koan_keys: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)

    @functools.cached_property
    def environment(self) -> str:
        return environment(self.root)

    def _key(self, path: str) -> str:
        if path not in self._keys:
            self._keys[path] = file_key(self.environment, self.root / path)
        return self._keys[path]

    def _koan_key(self, path: str, name: str) -> str | None:
        if path not in self._koan_keys:
            self._koan_keys[path] = koan_keys(self.environment, self.root / path)
        return self._koan_keys[path].get(name)

    def _current(self, stored: dict, path: str, name: str) -> bool:
        """Whether `stored`'s result for koan `name` still holds for the file as it is."""
        if name not in stored["koans"]:
            return False
        if stored.get("key") == self._key(path):
            return True
        key = stored.get("keys", {}).get(name)
        return key is not None and not stored.get("problem") and key == self._koan_key(path, name)

    def recall(self, koan) -> bool:
        """Fill in `koan`'s state from memory when what it depends on is unchanged."""
        path = koan.path.as_posix()
        stored = self.files.get(path)
        if not stored or not self._current(stored, path, koan.name):
            return False
        koan.hold(KoanResult.recalled(koan.nodeid, stored["koans"][koan.name]))
        koan.recalled = True
        return True

    def passed_before(self, path: str, name: str) -> bool:
        """Remembered as passing, whatever the file holds now (watch: broken again?)."""
        return self.files.get(path, {}).get("koans", {}).get(name, [""])[0] == KoanState.PASSED

    def remember(self, koans, file_problems: dict[str, str], complete: bool = True) -> None:
        """Store each file's results; a file with a crash in a run that did not finish (stopped)
        is measured again next time."""
        for path in dict.fromkeys(k.path.as_posix() for k in koans):
            own = [k for k in koans if k.path.as_posix() == path]
            self.files.pop(path, None)
            if complete or all(k.state != KoanState.CRASHED for k in own):
                self.learn(path, {k.name: k.result for k in own})
                self.files[path]["problem"] = file_problems.get(path, "")

    def learn(self, path: str, verdicts: dict[str, KoanResult]) -> None:
        """Add koans' verdicts (watch's, one koan's run, a whole file's) to what is known of
        `path` as it is now; the other koans' results stay where their own key still matches."""
        stored = self.files.get(path)
        if not stored or stored.get("key") != self._key(path):
            old = stored or {"koans": {}}
            kept = {n: v for n, v in old["koans"].items() if self._current(old, path, n)}
            keys = {n: self._koan_key(path, n) for n in kept}  # each matched: a str, never None
            stored = {"key": self._key(path), "koans": kept, "keys": keys, "problem": ""}
            self.files[path] = stored
        for name, verdict in verdicts.items():
            stored["koans"][name] = verdict.remembered()
            key = self._koan_key(path, name)
            if key:
                stored.setdefault("keys", {})[name] = key


def _well_formed(entry: object) -> bool:
    """A file's stored results as `remember` writes them (a hand-edited store may differ)."""
    try:
        found = [KoanResult.recalled("", v) for v in entry["koans"].values()]
        texts = [entry["key"], entry.get("problem", ""), *entry.get("keys", {}).values()]
    except (AttributeError, KeyError, TypeError, ValueError):
        return False
    texts += [text for result in found for text in (result.cause, result.note)]
    lines = [result.line for result in found if result.line is not None]
    return all(isinstance(t, str) for t in texts) and all(type(n) is int for n in lines)


def load(checkout: Course) -> Memory:
    """What is remembered; entries of the wrong shape are dropped (they are measured again)."""
    data = state.load(checkout.state, STORE)
    if data.get("schema") != SCHEMA or not isinstance(data.get("files"), dict):
        return Memory(checkout.root)
    return Memory(checkout.root, {p: e for p, e in data["files"].items() if _well_formed(e)})


def save(checkout: Course, memory: Memory) -> None:
    state.save(checkout.state, STORE, {"schema": SCHEMA, "files": memory.files})


def note_passed(checkout: Course, nodeid: str) -> None:
    state.save(checkout.state, LAST, {"passed": nodeid})
