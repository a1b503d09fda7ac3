"""TesseraDevicesArgs: the allocation gate and the default class controller."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from scheduler.api.config_reader import ArgsReader, Checks

FIELDS = ("allocationGate", "agentHeartbeatTimeoutSeconds", "defaultClassController")


class DeviceArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    allocation_gate: bool = True
    # the gate holds only on nodes whose agent heartbeat (ExtendedResource
    # status.lastHeartbeatTime) is at most this old: without an agent nothing would ever open it
    agent_heartbeat_timeout_seconds: int = Field(default=90, ge=1)
    default_class_controller: bool = False  # create one ResourceClass per GPU model (the live shell)


def parse_args(args: ArgsReader) -> DeviceArgs:
    found = Checks()
    gate = found.read(lambda: args.get_bool("allocationGate", True), True)
    timeout = found.read(lambda: args.positive("agentHeartbeatTimeoutSeconds", 90), 90)
    controller = found.read(lambda: args.get_bool("defaultClassController", False), False)
    found.raise_errors()
    return DeviceArgs(allocation_gate=gate, agent_heartbeat_timeout_seconds=timeout,
                      default_class_controller=controller)
