"""Table version procedures (Hudi's UpgradeTableProcedure and DowngradeTableProcedure, one UpgradeOrDowngradeProcedure
in Hudi): `CALL upgrade_table(table => 't', to_version => 'NINE')`, `CALL downgrade_table(...)`, over
storage.table_service.upgrade_downgrade (imported when called).

`to_version` takes Hudi's names (SIX, EIGHT, NINE) or the numbers. Hudi answers `result = false` when the run
fails and logs why; here a refusal (pending instants, an unknown version, the wrong direction, a feature the
lower version cannot record) is the CALL's error, naming the reason, and the table is unchanged. The extra columns
say what was done."""
from __future__ import annotations

import logging

from sqlext.sql.procedures.registry import optional, procedure

log = logging.getLogger(__name__)

_PARAMETERS = [optional("table", "string"), optional("to_version", "string"), optional("path", "string")]
_OUTPUT = ("result boolean, from_version int, to_version int, steps string, active_instants int, "
           "archived_actions int, log_files_renamed int")


def _run(call, args, upgrade: bool):
    from storage.table_service.upgrade_downgrade import downgrade_table, upgrade_table

    if not args.get("to_version"):
        raise call.error("to_version is required (SIX, EIGHT or NINE)")
    ref = call.table_ref(args.get("table"), args.get("path"))
    fn = upgrade_table if upgrade else downgrade_table
    done = call.run(fn, ref.path, args["to_version"], call.spark)
    call.resolver.refresh(ref)
    return [(True, done.from_version, done.to_version, ",".join(done.steps), done.active_instants,
             done.archived_actions, done.log_files_renamed)]


@procedure("upgrade_table", _PARAMETERS, _OUTPUT,
           "upgrade the table to table version to_version (6 -> 8 -> 9: the timeline layout, the archive, "
           "hoodie.properties); nothing when it is there already")
def upgrade_table(call, args):
    return _run(call, args, upgrade=True)


@procedure("downgrade_table", _PARAMETERS, _OUTPUT,
           "downgrade the table to table version to_version (9 -> 8 -> 6: hoodie.properties, the timeline layout, "
           "the archive, merge-on-read log file names); nothing when it is there already")
def downgrade_table(call, args):
    return _run(call, args, upgrade=False)
