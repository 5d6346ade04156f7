"""Dispatch of Thrift messages to the handler: the generated TCLIService processor plus Impala's GetLog, and
unknown methods answered with TApplicationException(UNKNOWN_METHOD) after skipping the request without
decoding its strings (handle ids are binary, not UTF-8)."""
from __future__ import annotations

from thrift.protocol.TBinaryProtocol import TBinaryProtocolAcceleratedFactory, TBinaryProtocolFactory
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TApplicationException, TMessageType, TType

from sqlext.server.third_party.getlog import TGetLogService
from sqlext.server.third_party.tcliservice import TCLIService

_MAX_SKIP_DEPTH = 64


class Processor(TCLIService.Processor):
    def __init__(self, handler):
        super().__init__(handler)
        self._processMap["GetLog"] = TGetLogService.Processor.process_GetLog

    def process(self, iprot, oprot):
        name, _type, seqid = iprot.readMessageBegin()
        method = self._processMap.get(name)
        if method is not None:
            method(self, seqid, iprot, oprot)
            return True
        skip(iprot, TType.STRUCT)
        iprot.readMessageEnd()
        error = TApplicationException(TApplicationException.UNKNOWN_METHOD, f"unknown method {name}")
        oprot.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
        error.write(oprot)
        oprot.writeMessageEnd()
        oprot.trans.flush()
        return None


def skip(prot, ttype: int, depth: int = _MAX_SKIP_DEPTH) -> None:
    """TProtocolBase.skip, except that strings are read as bytes."""
    if depth <= 0:
        raise TProtocolException(TProtocolException.DEPTH_LIMIT, "maximum skip depth exceeded")
    if ttype == TType.STRING:
        prot.readBinary()
    elif ttype == TType.STRUCT:
        prot.readStructBegin()
        while True:
            _name, ftype, _fid = prot.readFieldBegin()
            if ftype == TType.STOP:
                break
            skip(prot, ftype, depth - 1)
            prot.readFieldEnd()
        prot.readStructEnd()
    elif ttype == TType.MAP:
        ktype, vtype, size = prot.readMapBegin()
        for _ in range(size):
            skip(prot, ktype, depth - 1)
            skip(prot, vtype, depth - 1)
        prot.readMapEnd()
    elif ttype in (TType.LIST, TType.SET):
        etype, size = prot.readListBegin() if ttype == TType.LIST else prot.readSetBegin()
        for _ in range(size):
            skip(prot, etype, depth - 1)
        prot.readListEnd() if ttype == TType.LIST else prot.readSetEnd()
    else:
        prot.skip(ttype)


def protocol_factory(max_message_size: int):
    """The binary protocol (C-accelerated when the thrift runtime has it), refusing strings and containers
    larger than one message may be."""
    try:
        from thrift.protocol import fastbinary  # noqa: F401 - only whether the C extension exists
    except ImportError:
        return TBinaryProtocolFactory(string_length_limit=max_message_size, container_length_limit=max_message_size)
    return TBinaryProtocolAcceleratedFactory(string_length_limit=max_message_size,
                                             container_length_limit=max_message_size)
