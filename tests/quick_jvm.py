"""The environment for the Spark processes a test starts as subprocesses: JIT tier 1 only (`-XX:TieredStopAtLevel=1`
in JAVA_TOOL_OPTIONS, which every JVM of the process tree picks up: the driver, spark-submit's launcher, the
executors of local-cluster, an embedded metastore it starts).

Such a process does seconds of work, and HotSpot's C2 compiling during its start-up takes CPU from everything else
on a 2-core machine; tier 1 only changes which compiler runs, not what the program does. Measured on 2 cores (a
local session plus one Hudi write, the JVM's own CPU time): about 24 -> 13 s with the class data sharing archive
mapped, 44 -> 23 s without. The test session's own long-lived JVM keeps the default tiers. Every JVM given the
flag prints `Picked up JAVA_TOOL_OPTIONS: ...` on its stderr."""
from __future__ import annotations

import os

TIER1_ONLY = "-XX:TieredStopAtLevel=1"


def quick_jvm_env(base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """`base` (default: this process's environment) plus `extra`, with JVMs on JIT tier 1 only."""
    env = {**(os.environ if base is None else base), **extra}
    options = env.get("JAVA_TOOL_OPTIONS", "")
    if TIER1_ONLY not in options:
        env["JAVA_TOOL_OPTIONS"] = f"{options} {TIER1_ONLY}".strip()
    return env
