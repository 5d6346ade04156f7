"""The embedded metastore's main class: the HMS Thrift service on 127.0.0.1 with its idle watchdog.

Hive 2.3's `HiveMetaStore` main listens on every interface and has no bind-host setting, so the embedded
metastore runs `lakehouse.catalog.LoopbackHiveMetaStore` (catalog/java/LoopbackHiveMetaStore.java) instead: the
same handler and processor, on a loopback-bound server socket. The class is compiled with the JDK's `javac`
against pyspark's Hive jars at first use, into ``$XDG_CACHE_HOME/sqlext/metastore-server/<hash>`` (the hash
covers the source and the Hive jars, so an upgrade of either compiles again); later starts reuse it.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from catalog.metastore_client import MetastoreStartError

log = logging.getLogger(__name__)

SERVER_CLASS = "lakehouse.catalog.LoopbackHiveMetaStore"
SOURCE = Path(__file__).parent / "java" / "LoopbackHiveMetaStore.java"
# Hadoop has no connector for these in pyspark's jars; the metastore only needs to record their locations.
LOCATION_ONLY_FS_CLASS = "lakehouse.catalog.LocationOnlyFileSystem"
OBJECT_STORE_SCHEMES = ("s3", "s3a", "s3n", "gs", "gcs")


def java_sources() -> list[Path]:
    return sorted(SOURCE.parent.glob("*.java"))


def location_only_fs_settings() -> dict[str, str]:
    """hive-site settings that give the metastore `LocationOnlyFileSystem` for object-store schemes."""
    return {f"fs.{scheme}.impl": LOCATION_ONLY_FS_CLASS for scheme in OBJECT_STORE_SCHEMES}
JAVA_RELEASE = "17"  # what pyspark 4 needs anyway


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sqlext" / "metastore-server"


def javac_executable(java: str) -> str:
    """The `javac` of the JDK that runs `java` (else $JAVA_HOME's, else the one on PATH)."""
    candidates = [Path(os.path.realpath(java)).parent / "javac"]
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]) / "bin" / "javac")
    for candidate in candidates:
        if candidate.exists():
            return str(candidate)
    found = shutil.which("javac")
    if not found:
        raise MetastoreStartError(
            f"the embedded metastore needs a JDK (javac, Java {JAVA_RELEASE}+) to build its loopback server class; "
            f"no javac next to {java}, in JAVA_HOME or on PATH")
    return found


def server_classes(jars: Path, java: str) -> Path:
    """The directory holding the compiled server classes (compiled now when the cache has none)."""
    sources = java_sources()
    source = b"\n".join(p.read_bytes() for p in sources)
    hive_jars = sorted(p.name for p in jars.glob("hive-*.jar")) + sorted(p.name for p in jars.glob("libthrift-*.jar"))
    key = hashlib.sha256(source + "\n".join(hive_jars).encode()).hexdigest()[:16]
    target = cache_dir() / key
    if (target / (SERVER_CLASS.replace(".", "/") + ".class")).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    build = target.parent / f".{key}.{os.getpid()}.tmp"
    shutil.rmtree(build, ignore_errors=True)
    started = time.monotonic()
    cmd = [javac_executable(java), "--release", JAVA_RELEASE, "-nowarn", "-cp", f"{jars}/*", "-d", str(build),
           *map(str, sources)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(build, ignore_errors=True)
        raise MetastoreStartError(f"javac could not compile {SOURCE.parent}:\n{done.stderr[-3000:]}")
    try:
        os.rename(build, target)
    except OSError:  # another process published it first: theirs is the same class
        shutil.rmtree(build, ignore_errors=True)
    log.info("compiled %s in %.1fs into %s", SERVER_CLASS, time.monotonic() - started, target)
    return target
