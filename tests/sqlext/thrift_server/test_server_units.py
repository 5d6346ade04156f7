"""The server's pure parts without a server: settings under Hive's names, the users file, JDBC patterns, and
Arrow columns to TColumns (typed values, NULL bitmaps least significant bit first)."""
from __future__ import annotations

import os
import stat

import pyarrow as pa
import pytest

from sqlext.server.auth import Authenticator, UsersFile
from sqlext.server.config import ServerConfig
from sqlext.server.errors import HoodieAuthenticationError, HoodieUsersFileError
from sqlext.server.metadata import pattern_matcher
from sqlext.server.rowset import null_bitmap, to_tcolumn
from sqlext.server.schema import Wire


def test_config_from_hive_keys_and_overrides():
    config, rest = ServerConfig.from_conf({"hive.server2.thrift.port": "12000", "hive.server2.authentication": "NOSASL",
                                           "spark.sql.shuffle.partitions": "4"}, host="0.0.0.0")
    assert (config.port, config.auth, config.host) == (12000, "nosasl", "0.0.0.0")
    assert rest == {"spark.sql.shuffle.partitions": "4"}
    with pytest.raises(ValueError, match="hive.server2.thrift.port"):
        ServerConfig.from_conf({"hive.server2.thrift.port": "ten"})
    with pytest.raises(ValueError, match="NOSASL and NONE would let anyone in"):
        ServerConfig(auth="nosasl", users_file="/tmp/users")
    assert ServerConfig.from_conf({}, users_file="/tmp/users")[0].auth == "plain"


def test_users_file_hashes_salted_and_checks(tmp_path):
    path = tmp_path / "users"
    users = UsersFile(path)
    assert users.add("ann", "pw1") is True
    assert users.add("ann", "pw2") is False          # password changed
    assert users.add("bob", "pw1") is True
    text = path.read_text()
    assert "pw1" not in text and "pw2" not in text
    ann, bob = users.users()["ann"], users.users()["bob"]
    assert ann.salt != bob.salt
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    auth = Authenticator("plain", UsersFile(path))
    assert auth.authenticate("ann", "pw2") == "ann"
    assert auth.authenticate("ann", "pw2") == "ann"  # remembered
    for user, password in (("ann", "pw1"), ("carl", "pw1"), ("", "x")):
        with pytest.raises(HoodieAuthenticationError):
            auth.authenticate(user, password)
    with pytest.raises(HoodieUsersFileError, match="invalid user name"):
        users.add("a:b", "x")
    path.write_text("ann:md5:1:2\n")
    with pytest.raises(HoodieUsersFileError, match="line 1"):
        UsersFile(path).users()


def test_jdbc_patterns():
    match = pattern_matcher("mor\\_t%")
    assert match("mor_t_ro") and match("MOR_T") and not match("morxt")
    assert pattern_matcher("c_w_t")("cow_t") and not pattern_matcher("c_w_t")("cow__t")
    assert pattern_matcher(None)("anything") and pattern_matcher("%")("")


def test_columns_with_nulls_lsb_first():
    array = pa.array([1, None, 3, None, None, 6, 7, 8, None], pa.int64())
    assert null_bitmap(array) == bytes([0b00011010, 0b00000001])
    column = to_tcolumn(array, Wire.I64).i64Val
    assert column.values == [1, 0, 3, 0, 0, 6, 7, 8, 0]
    assert to_tcolumn(pa.array(["a", None]), Wire.STRING).stringVal.values == ["a", ""]
    assert to_tcolumn(pa.array([1.5], pa.float32()), Wire.DOUBLE).doubleVal.values == [1.5]
    assert to_tcolumn(pa.array([True, False]), Wire.BOOL).boolVal.nulls == b""
    assert to_tcolumn(pa.chunked_array([[b"\x01"], [None]]), Wire.BINARY).binaryVal.values == [b"\x01", b""]
