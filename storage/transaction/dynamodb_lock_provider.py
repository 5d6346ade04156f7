"""Hudi's DynamoDBBasedLockProvider: one item per Hudi table in the DynamoDB table
`hoodie.write.lock.dynamodb.table` (key attribute `key` = `partition_key`, default the table name), leased the way
AWS's DynamoDB lock client leases it, which Hudi uses:

- the item names its owner, its lease duration (Hudi: `hoodie.write.lock.wait_time_ms`) and a record version
  number (RVN), a fresh UUID on every write; every write is conditional (PutItem / UpdateItem / DeleteItem with a
  condition on the key's absence or on the RVN last read), so two writers never both win;
- the holder heartbeats every third of the lease by changing the RVN;
- a waiter that sees the same RVN for a whole lease duration (timed on its own clock: no clock sync needed) takes
  the lease over, as its holder stopped heartbeating; a released lock is deleted.

The lock table is created (billing mode, capacities) when missing. An unreachable endpoint is a
`HoodieLockError` naming the provider, the endpoint, the lock table and the Hudi table.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from storage.config import LockConfigKeys as LK
from storage.exception import HoodieLockError
from storage.transaction.lease_renewal import LeaseRenewal
from storage.transaction.lock_provider import (
    poll_until,
    LockContext,
    LockProvider,
    register_lock_provider,
)

log = logging.getLogger(__name__)

CLASS_NAME = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
KEY = "key"  # the lock table's partition-key attribute, as Hudi creates it
_NAMES = {"#k": KEY, "#rvn": "recordVersionNumber", "#owner": "ownerName"}


@dataclass(frozen=True)
class DynamoLockSettings:
    table: str
    partition_key: str
    region: str
    endpoint_url: str | None
    billing_mode: str
    read_capacity: int
    write_capacity: int
    table_creation_timeout_s: float
    lease_s: float
    retry_wait_s: float
    credentials: tuple[str | None, str | None, str | None]

    @classmethod
    def of(cls, context: LockContext) -> DynamoLockSettings:
        c = context.config
        partition_key = c.get(LK.DYNAMODB_PARTITION_KEY) or context.table_name
        if not partition_key:
            raise HoodieLockError(f"the DynamoDB lock ({LK.PROVIDER.key}={CLASS_NAME}) of table {context.base_path} "
                                  f"needs {LK.DYNAMODB_PARTITION_KEY.key} (or a table name)")
        region = (c.props.get(LK.DYNAMODB_REGION.key) or os.environ.get("AWS_REGION") or c.get(LK.DYNAMODB_REGION))
        return cls(table=c.get(LK.DYNAMODB_TABLE), partition_key=partition_key, region=region,
                   endpoint_url=c.get(LK.DYNAMODB_ENDPOINT_URL), billing_mode=c.get(LK.DYNAMODB_BILLING_MODE),
                   read_capacity=c.get(LK.DYNAMODB_READ_CAPACITY), write_capacity=c.get(LK.DYNAMODB_WRITE_CAPACITY),
                   table_creation_timeout_s=c.get(LK.DYNAMODB_TABLE_CREATION_TIMEOUT) / 1000,
                   lease_s=c.get(LK.WAIT_TIME_MS) / 1000,
                   retry_wait_s=max(c.get(LK.RETRY_WAIT_TIME_MS), 1) / 1000,
                   credentials=(c.get(LK.AWS_ACCESS_KEY), c.get(LK.AWS_SECRET_KEY), c.get(LK.AWS_SESSION_TOKEN)))


@dataclass(frozen=True)
class Lease:
    owner: str
    rvn: str
    lease_s: float


def _client(settings: DynamoLockSettings):
    import boto3
    from botocore.config import Config

    # bounded: an endpoint that does not answer must end in an error, not a hang
    config = Config(connect_timeout=min(5.0, max(settings.lease_s, 1.0)), read_timeout=10,
                    retries={"max_attempts": 2, "mode": "standard"})
    key, secret, token = settings.credentials
    creds = ({"aws_access_key_id": key, "aws_secret_access_key": secret, "aws_session_token": token}
             if key else {})
    return boto3.session.Session().client("dynamodb", region_name=settings.region,
                                          endpoint_url=settings.endpoint_url, config=config, **creds)


class DynamoDBBasedLockProvider(LockProvider):
    def __init__(self, context: LockContext):
        self.settings = DynamoLockSettings.of(context)
        self.table = context.base_path
        self.owner = f"{uuid.uuid4()}@{socket.gethostname()}:{os.getpid()}"
        self.client = _client(self.settings)
        self._table_ready = False
        self._held: Lease | None = None
        self._state = threading.Lock()  # between the caller's thread and the heartbeat
        self._renewal = LeaseRenewal(f"dynamodb-lock-heartbeat-{self.owner[:8]}")
        self._seen: tuple[str, float] | None = None  # (RVN of another holder, when first seen)

    @property
    def lock_name(self) -> str:
        return (f"DynamoDB lock {self.settings.table}[{KEY}={self.settings.partition_key}] at "
                f"{self.settings.endpoint_url or self.settings.region}")

    def _call(self, operation: str, **kwargs) -> dict:
        """One DynamoDB request; a failed condition answers {"conditional_failed": True}."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client, operation)(TableName=self.settings.table, **kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return {"conditional_failed": True}
            raise self._error(f"{operation} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise self._error(f"unreachable: {exc}") from exc

    def _error(self, why: str) -> HoodieLockError:
        return HoodieLockError(
            f"DynamoDB at {self.settings.endpoint_url or 'region ' + self.settings.region} "
            f"({LK.DYNAMODB_ENDPOINT_URL.key}), lock table {self.settings.table} ({LK.DYNAMODB_TABLE.key}), "
            f"partition key {self.settings.partition_key}, for table {self.table} "
            f"({LK.PROVIDER.key}={CLASS_NAME}): {why}")

    # -- the lock table --------------------------------------------------------------------------------------
    def _ensure_table(self) -> None:
        if self._table_ready:
            return
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            status = self.client.describe_table(TableName=self.settings.table)["Table"]["TableStatus"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise self._error(f"DescribeTable failed: {exc}") from exc
            self._create_table()
            status = "CREATING"
        except BotoCoreError as exc:
            raise self._error(f"unreachable: {exc}") from exc
        if status != "ACTIVE":
            self._wait_active()
        self._table_ready = True

    def _create_table(self) -> None:
        from botocore.exceptions import ClientError

        s = self.settings
        kwargs = {"KeySchema": [{"AttributeName": KEY, "KeyType": "HASH"}],
                  "AttributeDefinitions": [{"AttributeName": KEY, "AttributeType": "S"}], "BillingMode": s.billing_mode}
        if s.billing_mode == "PROVISIONED":
            kwargs["ProvisionedThroughput"] = {"ReadCapacityUnits": s.read_capacity,
                                               "WriteCapacityUnits": s.write_capacity}
        log.info("creating the DynamoDB lock table %s (%s)", s.table, s.billing_mode)
        try:
            self.client.create_table(TableName=s.table, **kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":  # another writer created it
                raise self._error(f"CreateTable failed: {exc}") from exc

    def _wait_active(self) -> None:
        deadline = time.monotonic() + self.settings.table_creation_timeout_s
        while self._call("describe_table")["Table"]["TableStatus"] != "ACTIVE":
            if time.monotonic() >= deadline:
                raise self._error(f"the lock table did not become ACTIVE within "
                                  f"{LK.DYNAMODB_TABLE_CREATION_TIMEOUT.key}={int(self.settings.table_creation_timeout_s * 1000)}")
            time.sleep(0.5)

    # -- locking ---------------------------------------------------------------------------------------------
    def try_lock(self, timeout_s: float) -> bool:
        if self._held is not None:
            raise HoodieLockError(f"{self.lock_name} is already held by this provider ({self.owner})")
        self._ensure_table()
        return poll_until(self._try_once, timeout_s, min(self.settings.retry_wait_s, self.settings.lease_s / 3))

    def _read(self) -> Lease | None:
        item = self._call("get_item", Key={KEY: {"S": self.settings.partition_key}}, ConsistentRead=True).get("Item")
        if not item or item.get("isReleased", {}).get("BOOL"):
            return None
        return Lease(item["ownerName"]["S"], item["recordVersionNumber"]["S"],
                     int(item["leaseDuration"]["S"]) / 1000)

    def _try_once(self) -> bool:
        current = self._read()
        if current is not None and not self._lease_ran_out(current):
            return False
        rvn = str(uuid.uuid4())
        item = {KEY: {"S": self.settings.partition_key}, "ownerName": {"S": self.owner},
                "recordVersionNumber": {"S": rvn}, "leaseDuration": {"S": str(int(self.settings.lease_s * 1000))}}
        if current is None:
            condition = {"ConditionExpression": "attribute_not_exists(#k)", "ExpressionAttributeNames": {"#k": KEY}}
        else:
            log.warning("%s: taking over the lease of %s, not renewed for %.1fs", self.lock_name, current.owner,
                        current.lease_s)
            condition = {"ConditionExpression": "#rvn = :rvn", "ExpressionAttributeNames": {"#rvn": _NAMES["#rvn"]},
                         "ExpressionAttributeValues": {":rvn": {"S": current.rvn}}}
        if self._call("put_item", Item=item, **condition).get("conditional_failed"):
            return False
        with self._state:
            self._held = Lease(self.owner, rvn, self.settings.lease_s)
        self._seen = None
        self._renewal.start(self.settings.lease_s / 3, self._renew)
        return True

    def _lease_ran_out(self, current: Lease) -> bool:
        """Whether `current`'s RVN has stayed the same for its whole lease, on this process's clock."""
        now = time.monotonic()
        if self._seen is None or self._seen[0] != current.rvn:
            self._seen = (current.rvn, now)
            return False
        return now - self._seen[1] >= current.lease_s

    def _renew(self) -> bool:
        """A new RVN on our item; False when the lease was taken over (the heartbeat then stops)."""
        with self._state:
            if self._held is None or self._renewal.stopped:
                return False
            rvn = str(uuid.uuid4())
            try:
                result = self._call(
                    "update_item", Key={KEY: {"S": self.settings.partition_key}},
                    UpdateExpression="SET #rvn = :new", ConditionExpression="#rvn = :old AND #owner = :me",
                    ExpressionAttributeNames={"#rvn": _NAMES["#rvn"], "#owner": _NAMES["#owner"]},
                    ExpressionAttributeValues={":new": {"S": rvn}, ":old": {"S": self._held.rvn},
                                               ":me": {"S": self.owner}})
            except HoodieLockError as exc:  # transient, maybe: retried at the next beat
                log.warning("%s: heartbeat failed, retrying: %s", self.lock_name, exc)
                return True
            if result.get("conditional_failed"):
                self._renewal.mark_lost()
                log.error("%s: lease taken over by another writer after missed heartbeats", self.lock_name)
                return False
            self._held = Lease(self.owner, rvn, self.settings.lease_s)
            return True

    @property
    def lost(self) -> bool:
        """True when another writer took the lease over while this provider believed it held it."""
        return self._renewal.lost

    def unlock(self) -> None:
        self._renewal.stop()
        with self._state:
            held, self._held = self._held, None
        if held is None:
            return
        result = self._call("delete_item", Key={KEY: {"S": self.settings.partition_key}},
                            ConditionExpression="#rvn = :rvn AND #owner = :me",
                            ExpressionAttributeNames={"#rvn": _NAMES["#rvn"], "#owner": _NAMES["#owner"]},
                            ExpressionAttributeValues={":rvn": {"S": held.rvn}, ":me": {"S": self.owner}})
        if result.get("conditional_failed"):
            log.warning("%s: the lease had already been taken over at release", self.lock_name)

    def owner_info(self) -> str:
        try:
            current = self._read()
        except HoodieLockError:
            return ""
        return f"owner {current.owner} (lease {current.lease_s:g}s)" if current else ""

    def close(self) -> None:
        self.unlock()


register_lock_provider(CLASS_NAME, DynamoDBBasedLockProvider)
