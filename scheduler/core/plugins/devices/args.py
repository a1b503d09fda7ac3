"""TesseraDevicesArgs: the allocation gate and the default class controller."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from scheduler.api.config_reader import ArgsReader

FIELDS = ("allocationGate", "agentHeartbeatTimeoutSeconds", "defaultClassController")


class DeviceArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    allocation_gate: bool = True
    # the gate holds only on nodes whose agent heartbeat (ExtendedResource
    # status.lastHeartbeatTime) is at most this old: without an agent nothing would ever open it
    agent_heartbeat_timeout_seconds: int = Field(default=90, ge=1)
    default_class_controller: bool = False  # create one ResourceClass per GPU model (the live shell)


def parse_args(args: ArgsReader) -> DeviceArgs:
    return DeviceArgs(
        allocation_gate=args.get_bool("allocationGate", True),
        agent_heartbeat_timeout_seconds=args.positive("agentHeartbeatTimeoutSeconds", 90),
        default_class_controller=args.get_bool("defaultClassController", False),
    )
