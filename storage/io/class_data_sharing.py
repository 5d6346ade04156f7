"""Class data sharing (CDS) for the JVMs this project starts: a JVM that maps an archive of the classes Spark
loads at start-up starts in about half the time (measured on 2 cores: a local SparkSession plus its first query
13.0 s without, 7.8 s with; bench/README "Start-up").

The archive is a HotSpot *dynamic* archive (`-XX:ArchiveClassesAtExit` while a training workload runs,
`-XX:SharedArchiveFile` afterwards). It is only valid for one JVM build and one class path, so it is kept per
key (the java binary and libjvm, the Spark jars) in a user cache directory, built once in the background the
first time it is missing, and published by an atomic rename only after the training JVM has exited cleanly:
HotSpot maps a truncated archive without checking it and dies with SIGBUS, so a half-written file must never
carry the final name. A JVM whose class path does not match the archive just starts without it; its CDS
warnings are silenced because HotSpot prints them on stdout, into the user's query output.

`SQLEXT_CLASS_DATA_SHARING=off` turns all of it off; `SQLEXT_CACHE_DIR` moves the cache. (In storage/io: the
archives are files of the local host, and this layer is where files are touched directly.)
"""
from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ENABLED_ENV = "SQLEXT_CLASS_DATA_SHARING"
CACHE_ENV = "SQLEXT_CACHE_DIR"
# set in the training workload's environment: the path its JVM dumps the archive to at exit
TRAINING_ARCHIVE_ENV = "SQLEXT_CDS_TRAINING_ARCHIVE"
QUIET = "-Xlog:cds*=off"
ARCHIVE_SUFFIX = ".jsa"
TRAINING_TIMEOUT_S = 900.0
# a lock older than this belongs to a trainer that died without removing it
STALE_LOCK_S = 1800.0
KEPT_ARCHIVES = 3


def enabled() -> bool:
    return os.environ.get(ENABLED_ENV, "on").strip().lower() not in ("off", "0", "false", "no")


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]) / "jvm"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sqlext" / "jvm"


def java_binary() -> Path | None:
    """The java binary this project's JVMs run (Spark's launcher, the embedded metastore): $JAVA_HOME/bin/java,
    else the first `java` on PATH; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home, "bin", "java") if home else None
    found = candidate if candidate is not None and candidate.exists() else shutil.which("java")
    return Path(found).resolve() if found else None


def _fingerprint(path: Path) -> str:
    stat = path.stat()
    return f"{path}:{stat.st_size}:{int(stat.st_mtime)}"


@dataclass(frozen=True)
class ArchiveKey:
    """What an archive is valid for: one JVM build and one set of jars on the class path."""

    java: Path
    jars_dir: Path
    extra_classpath: str = ""

    @property
    def digest(self) -> str:
        parts = [_fingerprint(self.java)]
        libjvm = self.java.parent.parent / "lib" / "server" / "libjvm.so"
        if libjvm.exists():  # a JDK updated in place keeps its java launcher but not its libjvm
            parts.append(_fingerprint(libjvm))
        parts += sorted(_fingerprint(jar) for jar in self.jars_dir.glob("*.jar"))
        parts.append(self.extra_classpath)
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]

    @property
    def archive(self) -> Path:
        return cache_dir() / f"{self.digest}{ARCHIVE_SUFFIX}"

    @property
    def lock(self) -> Path:
        return cache_dir() / f"{self.digest}.training"


def spark_archive_key(extra_classpath: str = "") -> ArchiveKey | None:
    """The key of the Spark driver JVM that PySpark launches (None without a java binary)."""
    java = java_binary()
    if java is None:
        return None
    import pyspark

    return ArchiveKey(java, Path(pyspark.__file__).parent / "jars", extra_classpath)


def java_options(key: ArchiveKey | None, workload: list[str]) -> str | None:
    """JVM options for a JVM of `key`: map the archive when it is there; when it is not, start training it
    (once, in the background, by running `workload`) and return None. While this process *is* the training
    workload, the options that dump the archive."""
    training = os.environ.get(TRAINING_ARCHIVE_ENV)
    if training:
        return f"-XX:ArchiveClassesAtExit={training} {QUIET}"
    if key is None or not enabled():
        return None
    if key.archive.exists():
        return f"-XX:SharedArchiveFile={key.archive} {QUIET}"
    start_training(key, workload)
    return None


def start_training(key: ArchiveKey, workload: list[str]) -> bool:
    """Start a detached trainer for `key` unless one runs; True when this call started it."""
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        if not _take_lock(key.lock):
            return False
        log_file = open(key.lock.with_suffix(".log"), "wb")  # noqa: SIM115 - handed to the child
    except OSError as exc:  # a read-only home: run without an archive
        log.debug("class data sharing: cannot use %s: %s", cache_dir(), exc)
        return False
    with log_file:
        # its own session: the trainer outlives this process and a Ctrl-C here does not reach it
        cmd = [sys.executable, "-m", __name__, "train", "--java", str(key.java), "--jars", str(key.jars_dir),
               "--extra-classpath", key.extra_classpath, "--", *workload]
        subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                         start_new_session=True, close_fds=True, env={**os.environ, ENABLED_ENV: "off"})
    log.info("class data sharing: training an archive for %s in the background", key.java)
    return True


def _take_lock(lock: Path) -> bool:
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                if time.time() - lock.stat().st_mtime < STALE_LOCK_S:
                    return False
                lock.unlink()
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))
        return True
    return False


def train(key: ArchiveKey, workload: list[str], timeout_s: float = TRAINING_TIMEOUT_S) -> Path | None:
    """Run `workload` with its JVM dumping to a temporary file; publish it under the key's name only when the
    workload (which waits for its JVM to exit) succeeded and a JVM maps the result cleanly."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    partial = key.archive.with_name(f"{key.digest}.{os.getpid()}.partial")
    env = {**os.environ, TRAINING_ARCHIVE_ENV: str(partial), ENABLED_ENV: "off"}
    try:
        started = time.monotonic()
        result = subprocess.run(workload, env=env, timeout=timeout_s, stdin=subprocess.DEVNULL)
        if result.returncode != 0 or not partial.exists():
            log.warning("class data sharing: training failed (exit %s); no archive", result.returncode)
            return None
        if not maps_cleanly(key.java, partial):
            log.warning("class data sharing: the trained archive does not load; no archive")
            return None
        os.replace(partial, key.archive)
        _keep_newest(KEPT_ARCHIVES)
        log.info("class data sharing: %s ready after %.0f s", key.archive, time.monotonic() - started)
        return key.archive
    except subprocess.TimeoutExpired:
        log.warning("class data sharing: training timed out after %.0f s; no archive", timeout_s)
        return None
    finally:
        partial.unlink(missing_ok=True)
        key.lock.unlink(missing_ok=True)


def maps_cleanly(java: Path, archive: Path) -> bool:
    """A JVM given `archive` starts and exits cleanly: a damaged archive crashes it (SIGBUS) instead of being
    refused, so no archive is published without this check. (An archive of another class path is refused
    quietly and passes; that is harmless.)"""
    try:
        # a crash here is the expected answer for a damaged archive: no hs_err file in the working directory
        return subprocess.run([str(java), f"-XX:SharedArchiveFile={archive}", QUIET, "-XX:ErrorFile=/dev/null",
                               "-version"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=archive.parent, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _keep_newest(count: int) -> None:
    """Archives of other keys (other virtualenvs or JDKs) stay, up to `count` in all: ~190 MB each."""
    archives = sorted(cache_dir().glob(f"*{ARCHIVE_SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[count:]:
        old.unlink(missing_ok=True)


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    sub = parser.add_subparsers(dest="command", required=True)
    trainer = sub.add_parser("train", help="build the archive for one key by running a workload")
    trainer.add_argument("--java", required=True)
    trainer.add_argument("--jars", required=True)
    trainer.add_argument("--extra-classpath", default="")
    trainer.add_argument("workload", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    workload = args.workload[1:] if args.workload[:1] == ["--"] else args.workload
    key = ArchiveKey(Path(args.java), Path(args.jars), args.extra_classpath)
    return 0 if train(key, workload) is not None else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
