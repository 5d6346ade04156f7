"""help: the procedures, or one procedure's parameters and output columns; with cmd => 'hoodie.<key>' (never a
procedure name) a config key's default, whether it is honoured, and its doc."""
from __future__ import annotations

from sqlext.config_doc import config_text
from sqlext.sql.procedures import registry
from storage.config import KEY_PREFIX
from storage.exception import HoodieConfigError
from sqlext.sql.procedures.registry import optional, procedure


@procedure("help", [optional("cmd", "string")], "result string",
           "lists the procedures, or with cmd => 'name' one procedure's parameters and output fields")
def help_(call, args):
    cmd = args.get("cmd")
    if not cmd:
        lines = ["synopsis", "\tcall [command]([key1]=>[value1],[key2]=>[value2])", "commands and description"]
        for name in registry.names():
            lines.append(f"\t{name}\t{registry.get(name).description}")
        lines.append("You can use 'call help(cmd=>[command])' to view the detailed parameters of the command")
        lines.append("and 'call help(cmd=>[hoodie.key])' (or `sqlext config --key K`) to view a config key")
        return [("\n".join(lines) + "\n",)]
    if cmd.strip().startswith(KEY_PREFIX):
        try:
            return [(config_text(cmd),)]
        except HoodieConfigError as exc:
            raise call.error(str(exc)) from None
    proc = registry.get(cmd.strip())
    if proc is None:
        raise call.error(f"can not find {cmd} command in procedures (known: {', '.join(registry.names())})")
    out = call.spark.createDataFrame([], proc.output).schema
    pad = "{:<30}".format
    lines = ["parameters:", "\t" + "\t".join(pad(h) for h in ("param", "type_name", "default_value", "required"))]
    for p in proc.parameters:
        lines.append("\t" + "\t".join(pad(x) for x in (p.name, p.type, str(p.default), str(p.required).lower())))
    lines += ["outputType:", "\t" + "\t".join(pad(h) for h in ("name", "type_name", "nullable", "metadata"))]
    for f in out.fields:
        lines.append("\t" + "\t".join(pad(x) for x in (f.name, f.dataType.typeName(), str(f.nullable).lower(), "{}")))
    return [("\n".join(lines) + "\n",)]
