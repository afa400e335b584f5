"""Pure parts of the launch path: template naming, AMI mapping, override shaping, fleet errors."""

from __future__ import annotations

import pytest

from karpenter_py.cloudprovider.aws import fleet, launchtemplates, userdata
from karpenter_py.cloudprovider.aws.capacityreservations import ReservationTarget
from karpenter_py.cloudprovider.aws.fleet import (
    FleetError,
    FleetLaunchError,
    FleetRequest,
    Override,
)
from karpenter_py.cloudprovider.aws.instance import (
    _launch_error,
    choose_capacity_type,
    parse_provider_id,
    plan_launch,
    split_tags,
    zonal_subnets,
)
from karpenter_py.cloudprovider.errors import CreateError, InsufficientCapacityError
from karpenter_py.model.core import SelectorRequirement
from karpenter_py.model.instancetype import InstanceType
from karpenter_py.scheduling.requirements import Requirements
from tests.aws.launchsupport import CLUSTER_INFO, ec2nodeclass, instance_type, nodeclaim

A, B, C = "us-west-2a", "us-west-2b", "us-west-2c"


def _name(**spec: object) -> str:
    nc = ec2nodeclass(**spec)  # type: ignore[arg-type]
    opts = launchtemplates.bootstrap_options(CLUSTER_INFO, nc, nodeclaim(), "on-demand")
    text = userdata.render(nc.spec.resolved_ami_family(), opts)
    data = launchtemplates.template_data(nc, "ami-1", text)
    return launchtemplates.template_name(data, launchtemplates.template_tags("c", nc))


def test_template_name_stable_and_sensitive() -> None:
    base = _name()
    assert base.startswith("karpenter.k8s.aws/")
    assert len(base) == len("karpenter.k8s.aws/") + 20
    assert _name() == base
    for changed in (
        {"detailedMonitoring": True},
        {"tags": {"team": "a"}},
        {"userData": "echo hi"},
        {"metadataOptions": {"httpTokens": "optional"}},
        {"security_groups": ("sg-other",)},
        {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "50Gi"}}]},
    ):
        assert _name(**changed) != base, changed


def test_template_data_defaults() -> None:
    nc = ec2nodeclass(security_groups=("sg-b", "sg-a"))
    data = launchtemplates.template_data(nc, "ami-1", "text")
    assert data == {
        "ImageId": "ami-1",
        "UserData": "dGV4dA==",
        "IamInstanceProfile": {"Name": "test-cluster_profile"},
        "MetadataOptions": {
            "HttpEndpoint": "enabled",
            "HttpProtocolIpv6": "disabled",
            "HttpPutResponseHopLimit": 1,
            "HttpTokens": "required",
        },
        "BlockDeviceMappings": [
            {
                "DeviceName": "/dev/xvda",
                "Ebs": {"Encrypted": True, "VolumeSize": 20, "VolumeType": "gp3"},
            }
        ],
        "Monitoring": {"Enabled": False},
        "SecurityGroupIds": ["sg-a", "sg-b"],
    }
    public = launchtemplates.template_data(
        ec2nodeclass(associatePublicIPAddress=True), "ami-1", "t"
    )
    assert "SecurityGroupIds" not in public
    assert public["NetworkInterfaces"] == [
        {"DeviceIndex": 0, "AssociatePublicIpAddress": True, "Groups": ["sg-0123"]}
    ]


@pytest.mark.parametrize(
    ("family", "devices"),
    [
        ("AL2023", [("/dev/xvda", 20)]),
        ("AL2", [("/dev/xvda", 20)]),
        ("Bottlerocket", [("/dev/xvda", 4), ("/dev/xvdb", 20)]),
        ("Custom", []),
    ],
)
def test_default_block_devices(family: str, devices: list[tuple[str, int]]) -> None:
    got = launchtemplates.default_block_devices(family)
    assert [(d["DeviceName"], d["Ebs"]["VolumeSize"]) for d in got] == devices


@pytest.mark.parametrize(("size", "gib"), [("20Gi", 20), ("100G", 94), ("1Ti", 1024), ("1T", 932)])
def test_volume_size_gib(size: str, gib: int) -> None:
    assert launchtemplates.volume_size_gib(size) == gib


def test_user_block_device_mapping() -> None:
    nc = ec2nodeclass(
        blockDeviceMappings=[
            {
                "deviceName": "/dev/xvda",
                "rootVolume": True,
                "ebs": {
                    "volumeSize": "100Gi",
                    "volumeType": "io2",
                    "iops": 3000,
                    "encrypted": True,
                },
            }
        ]
    )
    assert launchtemplates.block_devices(nc) == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"Encrypted": True, "Iops": 3000, "VolumeType": "io2", "VolumeSize": 100},
        }
    ]


def test_bootstrap_taints_include_unregistered() -> None:
    claim = nodeclaim(
        taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        startup_taints=[{"key": "init", "effect": "NoSchedule"}],
    )
    opts = launchtemplates.bootstrap_options(CLUSTER_INFO, ec2nodeclass(), claim, "spot")
    assert opts.taints == (
        ("gpu", "true", "NoSchedule"),
        ("init", "", "NoSchedule"),
        ("karpenter.sh/unregistered", "", "NoExecute"),
    )
    assert opts.labels == {"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot"}


def test_map_amis_first_compatible() -> None:
    nc = ec2nodeclass(
        amis=[("ami-arm-new", "arm64"), ("ami-amd", "amd64"), ("ami-arm-old", "arm64")]
    )
    types = [
        instance_type("m7g.large", [], arch="arm64"),
        instance_type("m5.large", []),
        instance_type("c7g.large", [], arch="arm64"),
    ]
    assert launchtemplates.map_amis(nc.status.amis, types) == [
        ("ami-arm-new", ("m7g.large", "c7g.large")),
        ("ami-amd", ("m5.large",)),
    ]


def _types() -> list[InstanceType]:
    return [
        instance_type(
            "t3.small", [(A, "on-demand", 0.02), (B, "on-demand", 0.021), (A, "spot", 0.007)]
        ),
        instance_type("m5.large", [(A, "on-demand", 0.096), (C, "on-demand", 0.09)]),
        instance_type("c5.large", [(B, "on-demand", 0.085), (B, "spot", 0.03)]),
    ]


def test_build_overrides_types_x_zones_by_price() -> None:
    subnets = {A: "subnet-a", B: "subnet-b"}
    got = fleet.build_overrides(
        [("lt-1", ("t3.small", "m5.large", "c5.large"))], _types(), subnets, "on-demand"
    )
    assert [(o.instance_type, o.subnet_id, o.priority) for o in got] == [
        ("t3.small", "subnet-a", 0.02),
        ("t3.small", "subnet-b", 0.021),
        ("c5.large", "subnet-b", 0.085),
        ("m5.large", "subnet-a", 0.096),  # m5.large in C has no subnet here
    ]
    spot = fleet.build_overrides([("lt-1", ("t3.small", "c5.large"))], _types(), subnets, "spot")
    assert [(o.instance_type, o.zone) for o in spot] == [("t3.small", A), ("c5.large", B)]


def test_build_overrides_caps_at_cheapest_types() -> None:
    types = [instance_type(f"x{i}.large", [(A, "on-demand", 1.0 / (i + 1))]) for i in range(70)]
    names = tuple(t.name for t in types)
    got = fleet.build_overrides([("lt", names)], types, {A: "s"}, "on-demand")
    assert len(got) == 60
    assert {o.instance_type for o in got} == {f"x{i}.large" for i in range(10, 70)}
    assert got[0].instance_type == "x69.large"


def test_create_fleet_input_shape() -> None:
    req = FleetRequest(
        capacity_type="spot",
        overrides=(
            Override("lt-1", "t3.small", "subnet-a", A, 0.007),
            Override("lt-2", "m7g.large", "subnet-b", B, 0.01),
        ),
        tags=(("karpenter.sh/nodepool", "default"),),
    )
    params = fleet.create_fleet_input(req, 3)
    tags = [{"Key": "karpenter.sh/nodepool", "Value": "default"}]
    assert params == {
        "Type": "instant",
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": 3,
            "DefaultTargetCapacityType": "spot",
        },
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "lt-1", "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": "t3.small", "SubnetId": "subnet-a", "Priority": 0.007}
                ],
            },
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "lt-2", "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": "m7g.large", "SubnetId": "subnet-b", "Priority": 0.01}
                ],
            },
        ],
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tags},
            {"ResourceType": "volume", "Tags": tags},
            {"ResourceType": "fleet", "Tags": tags},
        ],
        "SpotOptions": {"AllocationStrategy": "price-capacity-optimized"},
    }
    od = fleet.create_fleet_input(FleetRequest("on-demand", (), (), context="ctx"), 1)
    assert od["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert "SpotOptions" not in od
    assert od["Context"] == "ctx"


def test_parse_fleet_response_errors() -> None:
    req = FleetRequest("on-demand", (Override("lt", "m5.large", "subnet-c", C, 0.1),), ())
    result = fleet.parse_fleet_response(
        req,
        {
            "Instances": [{"InstanceIds": ["i-1", "i-2"]}],
            "Errors": [
                {
                    "LaunchTemplateAndOverrides": {
                        "LaunchTemplateSpecification": {"LaunchTemplateName": "lt"},
                        "Overrides": {"InstanceType": "m5.large", "SubnetId": "subnet-c"},
                    },
                    "Lifecycle": "on-demand",
                    "ErrorCode": "InsufficientInstanceCapacity",
                    "ErrorMessage": "none left",
                }
            ],
        },
    )
    assert result.instance_ids == ["i-1", "i-2"]
    assert result.errors == [
        FleetError("InsufficientInstanceCapacity", "none left", "m5.large", C, "on-demand", "lt")
    ]


def _err(code: str, it: str = "m5.large", zone: str = A, ct: str = "spot") -> FleetError:
    return FleetError(code, "msg", it, zone, ct)


@pytest.mark.parametrize(
    ("errors", "kind", "offerings"),
    [
        (
            [_err("InsufficientInstanceCapacity"), _err("InsufficientInstanceCapacity", zone=B)],
            InsufficientCapacityError,
            (("m5.large", A, "spot"), ("m5.large", B, "spot")),
        ),
        (
            [_err("MaxSpotInstanceCountExceeded")],
            InsufficientCapacityError,
            (("m5.large", A, "spot"),),
        ),
        (
            [_err("VcpuLimitExceeded", ct="on-demand")],
            InsufficientCapacityError,
            (("m5.large", A, "on-demand"),),
        ),
        ([_err("UnfulfillableCapacity")], InsufficientCapacityError, (("m5.large", A, "spot"),)),
        ([_err("Unsupported")], InsufficientCapacityError, (("m5.large", A, "spot"),)),
        (
            [_err("InsufficientFreeAddressesInSubnet")],
            InsufficientCapacityError,
            (("m5.large", A, "spot"),),
        ),
        ([_err("SpotMaxPriceTooLow")], InsufficientCapacityError, (("m5.large", A, "spot"),)),
        ([_err("UnauthorizedOperation")], CreateError, None),
        ([], CreateError, None),
        (
            [_err("UnauthorizedOperation"), _err("InsufficientInstanceCapacity", it="c5.large")],
            InsufficientCapacityError,
            (("c5.large", A, "spot"),),
        ),
    ],
)
def test_launch_error_mapping(
    errors: list[FleetError], kind: type, offerings: tuple[tuple[str, str, str], ...] | None
) -> None:
    got = _launch_error(FleetLaunchError(errors))
    assert type(got) is kind
    if offerings is not None:
        assert isinstance(got, InsufficientCapacityError)
        assert got.offerings == offerings


def test_launch_template_not_found_detection() -> None:
    assert fleet.is_launch_template_not_found(
        FleetLaunchError([_err("InvalidLaunchTemplateName.NotFoundException")])
    )
    assert not fleet.is_launch_template_not_found(FleetLaunchError([_err("Unsupported")]))


def _reqs(*reqs: tuple[str, str, tuple[str, ...]]) -> Requirements:
    return Requirements.from_selectors(SelectorRequirement(k, op, v) for k, op, v in reqs)


@pytest.mark.parametrize(
    ("reqs", "expected"),
    [
        (_reqs(), "spot"),
        (_reqs(("karpenter.sh/capacity-type", "In", ("on-demand",))), "on-demand"),
        (_reqs(("karpenter.sh/capacity-type", "In", ("spot", "on-demand"))), "spot"),
        (_reqs(("karpenter.sh/capacity-type", "NotIn", ("spot",))), "on-demand"),
    ],
)
def test_choose_capacity_type(reqs: Requirements, expected: str) -> None:
    assert choose_capacity_type(reqs, _types(), [A, B]) == expected


def test_choose_on_demand_when_no_spot_in_zones() -> None:
    assert choose_capacity_type(_reqs(), _types(), [C]) == "on-demand"


def test_zonal_subnets_first_per_allowed_zone() -> None:
    nc = ec2nodeclass(
        subnets=[(A, "subnet-a1"), (B, "subnet-b1"), (A, "subnet-a2"), (C, "subnet-c")]
    )
    assert zonal_subnets(nc, _reqs()) == {A: "subnet-a1", B: "subnet-b1", C: "subnet-c"}
    zone_req = _reqs(("topology.kubernetes.io/zone", "In", (A, C)))
    assert zonal_subnets(nc, zone_req) == {A: "subnet-a1", C: "subnet-c"}


def test_split_tags() -> None:
    shared, own = split_tags({"karpenter.sh/nodeclaim": "x", "Name": "n", "team": "a"})
    assert (shared, own) == ({"team": "a"}, {"karpenter.sh/nodeclaim": "x", "Name": "n"})


@pytest.mark.parametrize(
    ("provider_id", "instance_id"),
    [("aws:///us-west-2a/i-0abc", "i-0abc"), ("aws:///us-west-2b/i-1", "i-1")],
)
def test_parse_provider_id(provider_id: str, instance_id: str) -> None:
    assert parse_provider_id(provider_id) == instance_id


@pytest.mark.parametrize(
    "bad", ["kwok://node", "aws:///i-0abc", "aws:///us-west-2a/", "aws:///us-west-2a/x-1", ""]
)
def test_parse_provider_id_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not an AWS instance ID"):
        parse_provider_id(bad)


def test_plan_launch_drops_spot_dearer_than_on_demand() -> None:
    types = [
        instance_type("cheap-od", [(A, "on-demand", 0.05)]),
        instance_type("ok-spot", [(A, "on-demand", 0.2), (A, "spot", 0.04)]),
        instance_type("dear-spot", [(A, "on-demand", 0.3), (A, "spot", 0.06)]),
    ]
    ct, chosen = plan_launch(_reqs(), types, [A])
    assert (ct, [t.name for t in chosen]) == ("spot", ["ok-spot"])
    # Spot-only NodeClaims keep every spot offering.
    spot_only = _reqs(("karpenter.sh/capacity-type", "In", ("spot",)))
    ct, chosen = plan_launch(spot_only, types, [A])
    assert (ct, [t.name for t in chosen]) == ("spot", ["ok-spot", "dear-spot"])


def test_plan_launch_falls_back_to_on_demand_when_all_spot_is_dearer() -> None:
    types = [
        instance_type("a", [(A, "on-demand", 0.05)]),
        instance_type("b", [(A, "on-demand", 0.2), (A, "spot", 0.1)]),
    ]
    ct, chosen = plan_launch(_reqs(), types, [A])
    assert (ct, [t.name for t in chosen]) == ("on-demand", ["a", "b"])


def test_plan_launch_spot_only_without_spot_is_insufficient() -> None:
    types = [instance_type("a", [(A, "on-demand", 0.05)])]
    with pytest.raises(InsufficientCapacityError, match="no allowed capacity type"):
        plan_launch(_reqs(("karpenter.sh/capacity-type", "In", ("spot",))), types, [A])
    with pytest.raises(InsufficientCapacityError, match="no instance type has an available"):
        plan_launch(_reqs(), types, [B])


# ---------------------------------------------------------------- reserved capacity


@pytest.mark.parametrize(
    ("reservation", "opt_out", "expected"),
    [
        (None, False, {}),
        (
            ReservationTarget("cr-1"),
            False,
            {
                "CapacityReservationSpecification": {
                    "CapacityReservationTarget": {"CapacityReservationId": "cr-1"}
                }
            },
        ),
        (
            ReservationTarget("cr-2", "capacity-block"),
            False,
            {
                "CapacityReservationSpecification": {
                    "CapacityReservationTarget": {"CapacityReservationId": "cr-2"}
                },
                "InstanceMarketOptions": {"MarketType": "capacity-block"},
            },
        ),
        # an on-demand launch of a class that selects reservations stays out of open ones
        (
            None,
            True,
            {"CapacityReservationSpecification": {"CapacityReservationPreference": "none"}},
        ),
    ],
)
def test_template_data_reservation_fields(
    reservation: ReservationTarget | None, opt_out: bool, expected: dict[str, object]
) -> None:
    nc = ec2nodeclass()
    data = launchtemplates.template_data(
        nc, "ami-1", "t", reservation, opt_out_of_open_reservations=opt_out
    )
    plain = launchtemplates.template_data(nc, "ami-1", "t")
    assert {k: v for k, v in data.items() if k not in plain} == expected


@pytest.mark.parametrize(
    ("target", "lifecycle"), [(None, "on-demand"), ("capacity-block", "capacity-block")]
)
def test_reserved_fleet_request_and_errors(target: str | None, lifecycle: str) -> None:
    override = Override("lt-r", "m5.large", "subnet-a", A, 0.0000001)
    req = FleetRequest("reserved", (override,), (), target_capacity_type=target or "on-demand")
    params = fleet.create_fleet_input(req, 1)
    assert params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == lifecycle
    assert params["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    response = {
        "Errors": [
            {
                "ErrorCode": "ReservationCapacityExceeded",
                "ErrorMessage": "full",
                "Lifecycle": "on-demand",
                "LaunchTemplateAndOverrides": {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": "lt-r"},
                    "Overrides": {"InstanceType": "m5.large", "SubnetId": "subnet-a"},
                },
            }
        ]
    }
    result = fleet.parse_fleet_response(req, response)
    # the offering that failed is the reserved one, whatever lifecycle EC2 names
    assert fleet.unavailable_offerings(result.errors) == (("m5.large", A, "reserved"),)
