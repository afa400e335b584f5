"""Every validation rule: a bad manifest is rejected with the offending field named and a message
saying what is allowed; the close-but-valid neighbour of each is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.model._manifests import DELETE, edit, errors_of, load

NP = "nodepool_default.yaml"
NC = "nodeclaim.yaml"
EC2 = "ec2nodeclass_default.yaml"
EC2_FULL = "ec2nodeclass_full.yaml"
KWOK = "kwoknodeclass.yaml"

REQ0 = "spec.template.spec.requirements[0]"
TSPEC = "spec.template.spec"
LABELS = "spec.template.metadata.labels"
DIS = "spec.disruption"
HUGE = "99999999999999999999h"
OUT_OF_RANGE = "out of range (at most 2562047h47m16.854775807s)"


def _req(key: str, operator: str, values: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator, **extra}
    if values is not None:
        out["values"] = values
    return out


def _budget(**fields: Any) -> list[dict[str, Any]]:
    return [fields]


# (manifest, path to change, new value, field the error must name, text the message must contain)
INVALID = [
    # --- requirements: operator/value rules
    (
        NP,
        REQ0,
        _req("kubernetes.io/arch", "In"),
        f"{REQ0}.values",
        "operator In needs at least one value",
    ),
    (NP, REQ0, _req("kubernetes.io/arch", "In", []), f"{REQ0}.values", "at least one value"),
    (
        NP,
        REQ0,
        _req("karpenter.k8s.aws/instance-cpu", "Gt", ["1", "2"]),
        f"{REQ0}.values",
        "exactly one value, a non-negative integer",
    ),
    (NP, REQ0, _req("karpenter.k8s.aws/instance-cpu", "Lt"), f"{REQ0}.values", "exactly one value"),
    (
        NP,
        REQ0,
        _req("karpenter.k8s.aws/instance-cpu", "Gte", ["1.5"]),
        f"{REQ0}.values",
        "non-negative integer",
    ),
    (
        NP,
        REQ0,
        _req("karpenter.k8s.aws/instance-cpu", "Lte", ["many"]),
        f"{REQ0}.values",
        "non-negative integer",
    ),
    (
        NP,
        REQ0,
        _req("kubernetes.io/arch", "Like", ["amd64"]),
        f"{REQ0}.operator",
        "'In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt', 'Gte' or 'Lte'",
    ),
    (
        NP,
        REQ0,
        _req("kubernetes.io/arch", "In", ["amd64", "arm64"], minValues=3),
        f"{REQ0}.minValues",
        "minValues is 3 but only 2 values",
    ),
    (
        NP,
        REQ0,
        _req("kubernetes.io/arch", "NotIn", ["a"], minValues=51),
        f"{REQ0}.minValues",
        "less than or equal to 50",
    ),
    (
        NP,
        REQ0,
        _req("kubernetes.io/arch", "In", ["a"], minValues=0),
        f"{REQ0}.minValues",
        "greater than or equal to 1",
    ),
    (
        NP,
        REQ0,
        _req("kubernetes.io/arch", "In", ["has space"]),
        f"{REQ0}.values[0]",
        "must be empty or alphanumerics",
    ),
    (NP, REQ0, _req("kubernetes.io/arch", "In", ["x" * 64]), f"{REQ0}.values[0]", "longer than 63"),
    (
        NP,
        f"{TSPEC}.requirements",
        [_req("kubernetes.io/arch", "Exists")] * 101,
        f"{TSPEC}.requirements",
        "at most 100 items",
    ),
    (NP, f"{TSPEC}.requirements", DELETE, f"{TSPEC}.requirements", "Field required"),
    # --- requirements: restricted keys
    (
        NP,
        REQ0,
        _req("karpenter.sh/nodepool", "In", ["x"]),
        f"{TSPEC}.requirements",
        'label "karpenter.sh/nodepool" is restricted',
    ),
    (
        NP,
        REQ0,
        _req("kubernetes.io/hostname", "In", ["x"]),
        f"{REQ0}.key",
        'label "kubernetes.io/hostname" is restricted',
    ),
    (
        NP,
        REQ0,
        _req("karpenter.sh/custom", "Exists"),
        f"{REQ0}.key",
        'label domain "karpenter.sh" is restricted',
    ),
    (
        NP,
        REQ0,
        _req("karpenter.sh/custom", "Exists"),
        f"{REQ0}.key",
        "allowed there: karpenter.sh/capacity-type",
    ),
    (
        NP,
        REQ0,
        _req("karpenter.k8s.aws/made-up", "Exists"),
        f"{REQ0}.key",
        'label domain "karpenter.k8s.aws" is restricted',
    ),
    (NP, REQ0, _req("Bad Key", "Exists"), f"{REQ0}.key", "is not a qualified name"),
    (NP, REQ0, _req("a/b/c", "Exists"), f"{REQ0}.key", "at most one '/'"),
    (NP, REQ0, _req("example.com/" + "n" * 64, "Exists"), f"{REQ0}.key", "at most 63 characters"),
    (NP, REQ0, _req("Example.com/x", "Exists"), f"{REQ0}.key", "prefix must be a DNS subdomain"),
    # --- template labels
    (
        NP,
        f'{LABELS}["karpenter.sh/nodepool"]',
        "x",
        LABELS,
        'label "karpenter.sh/nodepool" is restricted',
    ),
    (
        NP,
        f'{LABELS}["kubernetes.io/hostname"]',
        "x",
        LABELS,
        'label "kubernetes.io/hostname" is restricted',
    ),
    (
        NP,
        f'{LABELS}["karpenter.sh/team"]',
        "x",
        LABELS,
        'label domain "karpenter.sh" is restricted',
    ),
    (
        NP,
        f'{LABELS}["karpenter.k8s.aws/team"]',
        "x",
        LABELS,
        'label domain "karpenter.k8s.aws" is restricted',
    ),
    (NP, f'{LABELS}["bad key"]', "x", LABELS, "is not a qualified name"),
    (NP, f'{LABELS}["team"]', "y" * 64, f"{LABELS}.team", "longer than 63 characters"),
    (
        NP,
        f'{LABELS}["team"]',
        "-bad-",
        f"{LABELS}.team",
        "starting and ending with an alphanumeric",
    ),
    (NP, LABELS, {f"example.com/l{i}": "v" for i in range(101)}, LABELS, "at most 100 labels"),
    # --- durations
    (NP, f"{TSPEC}.expireAfter", "30d", f"{TSPEC}.expireAfter", "is not a duration such as"),
    (NP, f"{TSPEC}.expireAfter", "never", f"{TSPEC}.expireAfter", "'Never'"),
    (NP, f"{TSPEC}.expireAfter", "720h\n", f"{TSPEC}.expireAfter", "is not a duration"),
    (
        NP,
        f"{TSPEC}.terminationGracePeriod",
        "Never",
        f"{TSPEC}.terminationGracePeriod",
        "is not a duration such as '30s', '10m' or '1h30m'",
    ),
    (
        NP,
        f"{TSPEC}.terminationGracePeriod",
        "1.5h",
        f"{TSPEC}.terminationGracePeriod",
        "is not a duration",
    ),
    (NP, f"{DIS}.consolidateAfter", "1 minute", f"{DIS}.consolidateAfter", "is not a duration"),
    (NP, f"{DIS}.consolidateAfter", "", f"{DIS}.consolidateAfter", "is not a duration"),
    # Past Go's time.Duration (2562047h47m16.854775807s): the CRD pattern admits it, Go's
    # parser does not, and neither do we.
    (NP, f"{DIS}.consolidateAfter", HUGE, f"{DIS}.consolidateAfter", OUT_OF_RANGE),
    (NP, f"{TSPEC}.expireAfter", HUGE, f"{TSPEC}.expireAfter", OUT_OF_RANGE),
    (
        NP,
        f"{TSPEC}.terminationGracePeriod",
        "2562048h",
        f"{TSPEC}.terminationGracePeriod",
        OUT_OF_RANGE,
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(nodes="1", schedule="@daily", duration=HUGE),
        f"{DIS}.budgets[0].duration",
        OUT_OF_RANGE,
    ),
    # --- disruption
    (
        NP,
        f"{DIS}.consolidationPolicy",
        "WhenUnderutilized",
        f"{DIS}.consolidationPolicy",
        "'WhenEmpty', 'WhenEmptyOrUnderutilized' or 'Balanced'",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(nodes="101%"),
        f"{DIS}.budgets[0].nodes",
        "a node count or percentage",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(nodes="ten"),
        f"{DIS}.budgets[0].nodes",
        "a node count or percentage",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(nodes="-1"),
        f"{DIS}.budgets[0].nodes",
        "a node count or percentage",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(nodes="1", schedule="@daily"),
        f"{DIS}.budgets[0].duration",
        "'schedule' must be set with 'duration'",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(nodes="1", duration="1h"),
        f"{DIS}.budgets[0].duration",
        "set both or neither",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(schedule="@daily", duration="30s"),
        f"{DIS}.budgets[0].duration",
        "hours and/or minutes",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(schedule="every day", duration="1h"),
        f"{DIS}.budgets[0].schedule",
        "a cron schedule with five fields",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(schedule="@fortnightly", duration="1h"),
        f"{DIS}.budgets[0].schedule",
        "@hourly",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(schedule="TZ=UTC 0 9 * * *", duration="1h"),
        f"{DIS}.budgets[0].schedule",
        "time zones are not supported",
    ),
    (
        NP,
        f"{DIS}.budgets",
        _budget(nodes="1", reasons=["Consolidation"]),
        f"{DIS}.budgets[0].reasons[0]",
        "'Underutilized', 'Empty' or 'Drifted'",
    ),
    (NP, f"{DIS}.budgets", [{"nodes": "1"}] * 51, f"{DIS}.budgets", "at most 50 items"),
    # --- taints
    (
        NP,
        f"{TSPEC}.taints",
        [{"key": "a", "effect": "NoWay"}],
        f"{TSPEC}.taints[0].effect",
        "'NoSchedule', 'PreferNoSchedule' or 'NoExecute'",
    ),
    (
        NP,
        f"{TSPEC}.taints",
        [{"key": "", "effect": "NoSchedule"}],
        f"{TSPEC}.taints[0].key",
        "name part must not be empty",
    ),
    (
        NP,
        f"{TSPEC}.taints",
        [{"key": "a b", "effect": "NoSchedule"}],
        f"{TSPEC}.taints[0].key",
        "is not a qualified name",
    ),
    (
        NP,
        f"{TSPEC}.taints",
        [{"key": "a", "value": "b c", "effect": "NoSchedule"}],
        f"{TSPEC}.taints[0].value",
        "is not a qualified name",
    ),
    (NP, f"{TSPEC}.taints", [{"key": "a"}], f"{TSPEC}.taints[0].effect", "Field required"),
    (
        NP,
        f"{TSPEC}.taints",
        [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "value": "v", "effect": "NoSchedule"}],
        f"{TSPEC}.taints",
        "duplicate taint a:NoSchedule in taints[0] and taints[1]",
    ),
    (
        NP,
        TSPEC,
        {
            **load(NP)["spec"]["template"]["spec"],
            "taints": [{"key": "a", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "a", "effect": "NoSchedule"}],
        },
        f"{TSPEC}.startupTaints",
        "duplicate taint a:NoSchedule in taints[0] and startupTaints[0]",
    ),
    # --- nodeClassRef
    (
        NP,
        f"{TSPEC}.nodeClassRef.group",
        "karpenter.k8s.aws/v1",
        f"{TSPEC}.nodeClassRef.group",
        "without a version",
    ),
    (
        NP,
        f"{TSPEC}.nodeClassRef.group",
        "",
        f"{TSPEC}.nodeClassRef.group",
        "group may not be empty",
    ),
    (NP, f"{TSPEC}.nodeClassRef.kind", "", f"{TSPEC}.nodeClassRef.kind", "kind may not be empty"),
    (NP, f"{TSPEC}.nodeClassRef.name", DELETE, f"{TSPEC}.nodeClassRef.name", "Field required"),
    (NP, f"{TSPEC}.nodeClassRef", DELETE, f"{TSPEC}.nodeClassRef", "Field required"),
    # --- weight, limits, replicas
    (NP, "spec.weight", 0, "spec.weight", "greater than or equal to 1"),
    (NP, "spec.weight", 101, "spec.weight", "less than or equal to 100"),
    (NP, "spec.limits.memory", "lots", "spec.limits.memory", "is not a Kubernetes quantity"),
    (NP, "spec.replicas", -1, "spec.replicas", "greater than or equal to 0"),
    # --- unknown fields and kinds
    (
        NP,
        "spec.template.spec.kubelet",
        {"maxPods": 1},
        f"{TSPEC}.kubelet",
        "Extra inputs are not permitted",
    ),
    (
        NP,
        "spec.disruption.expireAfter",
        "720h",
        f"{DIS}.expireAfter",
        "Extra inputs are not permitted",
    ),
    (NP, "apiVersion", "karpenter.sh/v1beta1", "apiVersion", "'karpenter.sh/v1'"),
    (NP, "spec.template.spec", DELETE, "spec.template.spec", "Field required"),
    # --- NodeClaim
    (
        NC,
        "spec.requirements[0]",
        _req("kubernetes.io/arch", "In"),
        "spec.requirements[0].values",
        "at least one value",
    ),
    (
        NC,
        "spec.requirements[0]",
        _req("kubernetes.io/hostname", "Exists"),
        "spec.requirements[0].key",
        "restricted",
    ),
    (
        NC,
        "spec.resources.requests.cpu",
        "1.2.3",
        "spec.resources.requests.cpu",
        "is not a Kubernetes quantity",
    ),
    (NC, "spec.expireAfter", "1y", "spec.expireAfter", "is not a duration"),
    (NC, "spec.expireAfter", HUGE, "spec.expireAfter", OUT_OF_RANGE),
    (NC, "spec.requirements", DELETE, "spec.requirements", "Field required"),
    (
        NC,
        "status.conditions[0].status",
        "Maybe",
        "status.conditions[0].status",
        "'True', 'False' or 'Unknown'",
    ),
    (
        NC,
        "status.conditions[0].lastTransitionTime",
        DELETE,
        "status.conditions[0].lastTransitionTime",
        "Field required",
    ),
    # --- EC2NodeClass
    (
        EC2,
        "spec.instanceProfile",
        "my-profile",
        "spec",
        "exactly one of ['role', 'instanceProfile']",
    ),
    (EC2, "spec.role", DELETE, "spec", "exactly one of ['role', 'instanceProfile']"),
    (EC2, "spec.amiFamily", "Bottlerocket", "spec", "use 'AL2023' or 'Custom'"),
    (
        EC2,
        "spec.amiSelectorTerms",
        [{"alias": "al2023@latest"}, {"id": "ami-0123"}],
        "spec.amiSelectorTerms",
        "'alias' term must be the only",
    ),
    (
        EC2,
        "spec.amiSelectorTerms",
        [{"alias": "ubuntu@latest"}],
        "spec.amiSelectorTerms[0].alias",
        "family 'ubuntu' is not supported",
    ),
    (
        EC2,
        "spec.amiSelectorTerms",
        [{"alias": "al2023"}],
        "spec.amiSelectorTerms[0].alias",
        "format 'family@version'",
    ),
    (
        EC2,
        "spec.amiSelectorTerms",
        [{"alias": "windows2022@v1.0"}],
        "spec.amiSelectorTerms[0].alias",
        "only supports the version 'latest'",
    ),
    (EC2, "spec.amiSelectorTerms", [{"id": "ami-0123"}], "spec", "must specify amiFamily"),
    (
        EC2,
        "spec.amiSelectorTerms",
        [{"alias": "al2023@latest", "owner": "self"}],
        "spec.amiSelectorTerms[0]",
        "'owner' cannot be combined",
    ),
    (
        EC2,
        "spec.amiSelectorTerms",
        [{"id": "ami-0123", "name": "x"}],
        "spec.amiSelectorTerms[0]",
        "'id' is mutually exclusive",
    ),
    (
        EC2,
        "spec.amiSelectorTerms",
        [{"owner": "self"}],
        "spec.amiSelectorTerms[0]",
        "at least one of ['alias', 'tags', 'id', 'name', 'ssmParameter']",
    ),
    (EC2, "spec.amiSelectorTerms", [], "spec.amiSelectorTerms", "at least 1 item"),
    (EC2, "spec.amiSelectorTerms", [{"id": "image-1"}], "spec.amiSelectorTerms[0].id", "an AMI id"),
    (EC2, "spec.subnetSelectorTerms", [], "spec.subnetSelectorTerms", "at least 1 item"),
    (
        EC2,
        "spec.subnetSelectorTerms",
        [{}],
        "spec.subnetSelectorTerms[0]",
        "at least one of ['tags', 'id']",
    ),
    (
        EC2,
        "spec.subnetSelectorTerms",
        [{"id": "subnet-1", "tags": {"a": "b"}}],
        "spec.subnetSelectorTerms[0]",
        "'id' is mutually exclusive",
    ),
    (
        EC2,
        "spec.subnetSelectorTerms",
        [{"id": "sg-123"}],
        "spec.subnetSelectorTerms[0].id",
        "a subnet id",
    ),
    (
        EC2,
        "spec.subnetSelectorTerms",
        [{"tags": {"a": ""}}],
        "spec.subnetSelectorTerms[0].tags",
        "empty tag keys or values",
    ),
    (
        EC2,
        "spec.subnetSelectorTerms",
        [{"tags": {f"k{i}": "v" for i in range(21)}}],
        "spec.subnetSelectorTerms[0].tags",
        "at most 20 tags",
    ),
    (
        EC2,
        "spec.subnetSelectorTerms",
        [{"id": f"subnet-{i}"} for i in range(31)],
        "spec.subnetSelectorTerms",
        "at most 30 items",
    ),
    (
        EC2,
        "spec.securityGroupSelectorTerms",
        [{"id": "sg-1", "name": "x"}],
        "spec.securityGroupSelectorTerms[0]",
        "'id' is mutually exclusive",
    ),
    (
        EC2,
        "spec.securityGroupSelectorTerms",
        [{"name": "x", "tags": {"a": "b"}}],
        "spec.securityGroupSelectorTerms[0]",
        "'name' is mutually exclusive",
    ),
    (
        EC2,
        "spec.securityGroupSelectorTerms",
        DELETE,
        "spec.securityGroupSelectorTerms",
        "Field required",
    ),
    (
        EC2,
        "spec.capacityReservationSelectorTerms",
        [{"id": "cr-1", "ownerID": "123456789012"}],
        "spec.capacityReservationSelectorTerms[0]",
        "'id' is mutually exclusive",
    ),
    (
        EC2,
        "spec.capacityReservationSelectorTerms",
        [{"ownerID": "1234"}],
        "spec.capacityReservationSelectorTerms[0].ownerID",
        "12-digit",
    ),
    (
        EC2,
        "spec.capacityReservationSelectorTerms",
        [{"instanceMatchCriteria": "any"}],
        "spec.capacityReservationSelectorTerms[0].instanceMatchCriteria",
        "'open' or 'targeted'",
    ),
    (
        EC2,
        "spec.placementGroupSelector",
        {"name": "a", "id": "pg-1"},
        "spec.placementGroupSelector",
        "exactly one of 'name' or 'id'",
    ),
    (
        EC2,
        "spec.placementGroupSelector",
        {},
        "spec.placementGroupSelector",
        "exactly one of 'name' or 'id'",
    ),
    (EC2, "spec.tags", {"kubernetes.io/cluster/my-cluster": "owned"}, "spec.tags", "is restricted"),
    (EC2, "spec.tags", {"karpenter.sh/nodepool": "x"}, "spec.tags", "is restricted"),
    (EC2, "spec.tags", {"eks:eks-cluster-name": "x"}, "spec.tags", "is restricted"),
    (EC2, "spec.tags", {"": "x"}, "spec.tags", "empty tag keys"),
    (
        EC2,
        "spec.amiFamily",
        "Ubuntu",
        "spec.amiFamily",
        "'AL2', 'AL2023', 'Bottlerocket', 'Custom', 'Windows2019', 'Windows2022' or 'Windows2025'",
    ),
    (
        EC2,
        "spec.blockDeviceMappings",
        [{"rootVolume": True, "ebs": {"volumeSize": "20Gi"}}] * 2,
        "spec.blockDeviceMappings",
        "only one blockDeviceMappings with rootVolume",
    ),
    (
        EC2,
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeType": "gp3"}}],
        "spec.blockDeviceMappings[0].ebs",
        "snapshotID or volumeSize must be defined",
    ),
    (
        EC2,
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeSize": "20GB"}}],
        "spec.blockDeviceMappings[0].ebs.volumeSize",
        "a volume size in Gi, G, Ti or T",
    ),
    (
        EC2,
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeSize": "60000Gi"}}],
        "spec.blockDeviceMappings[0].ebs.volumeSize",
        "at most 59000Gi",
    ),
    (
        EC2,
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeSize": "20Gi", "volumeType": "gp4"}}],
        "spec.blockDeviceMappings[0].ebs.volumeType",
        "'gp3'",
    ),
    (
        EC2,
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 200}}],
        "spec.blockDeviceMappings[0].ebs",
        "volumeInitializationRate requires snapshotID",
    ),
    (
        EC2,
        "spec.blockDeviceMappings",
        [{"ebs": {"snapshotID": "snap-1", "volumeInitializationRate": 50}}],
        "spec.blockDeviceMappings[0].ebs.volumeInitializationRate",
        "greater than or equal to 100",
    ),
    (
        EC2,
        "spec.networkInterfaces",
        [{"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "interface"}],
        "spec.networkInterfaces",
        "must include a primary interface",
    ),
    (
        EC2,
        "spec.networkInterfaces",
        [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}] * 2,
        "spec.networkInterfaces",
        "pair may appear only once",
    ),
    (
        EC2,
        "spec.networkInterfaces",
        [
            {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
            {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
            {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "efa-only"},
        ],
        "spec.networkInterfaces",
        "at most one 'efa-only' interface per network card",
    ),
    (
        EC2,
        "spec.networkInterfaces",
        [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "ena"}],
        "spec.networkInterfaces[0].interfaceType",
        "'interface' or 'efa-only'",
    ),
    (
        EC2,
        "spec.metadataOptions",
        {"httpPutResponseHopLimit": 65},
        "spec.metadataOptions.httpPutResponseHopLimit",
        "less than or equal to 64",
    ),
    (
        EC2,
        "spec.metadataOptions",
        {"httpTokens": "sometimes"},
        "spec.metadataOptions.httpTokens",
        "'required' or 'optional'",
    ),
    (EC2, "spec.connectionTracking", {}, "spec.connectionTracking", "expected at least one of"),
    (
        EC2,
        "spec.connectionTracking",
        {"udpTimeout": 10},
        "spec.connectionTracking.udpTimeout",
        "greater than or equal to 30",
    ),
    (EC2, "spec.instanceStorePolicy", "RAID1", "spec.instanceStorePolicy", "'RAID0'"),
    (
        EC2,
        "spec.cpuOptions",
        {"nestedVirtualization": "on"},
        "spec.cpuOptions.nestedVirtualization",
        "'enabled' or 'disabled'",
    ),
    (EC2, "spec.kubelet", ["not", "a", "map"], "spec.kubelet", "valid dictionary"),
    # --- KWOKNodeClass
    (KWOK, "spec.nodeRegistrationDelay", "soon", "spec.nodeRegistrationDelay", "is not a duration"),
    (KWOK, "spec.nodeRegistrationDelay", HUGE, "spec.nodeRegistrationDelay", OUT_OF_RANGE),
    (
        KWOK,
        "spec.reservedResources",
        {"gpu": "1"},
        "spec.reservedResources",
        "valid keys are ['cpu', 'memory', 'ephemeral-storage', 'pid']",
    ),
    (
        KWOK,
        "spec.reservedResources",
        {"cpu": "-1"},
        "spec.reservedResources",
        "cannot be a negative quantity",
    ),
    (KWOK, "spec.reservedResources", {"cpu": 1}, "spec.reservedResources.cpu", "valid string"),
    (
        KWOK,
        "spec.reservedResources",
        {"cpu": "lots"},
        "spec.reservedResources.cpu",
        "is not a Kubernetes quantity",
    ),
    (KWOK, "spec.maxPods", -1, "spec.maxPods", "greater than or equal to 0"),
]

STATIC_POOL_CASES = [
    ({"replicas": 3, "weight": 10}, "'weight' is not supported on static NodePools"),
    ({"replicas": 3, "limits": {"cpu": "10"}}, "only 'limits.nodes' is supported"),
]


def _ids(case: tuple[Any, ...]) -> str:
    return f"{case[0].split('.')[0]}:{case[3]}:{case[4]}"


@pytest.mark.parametrize("case", INVALID, ids=_ids)
def test_invalid_manifest_names_field_and_rule(case):
    filename, path, value, field, message = case
    errors = errors_of(edit(load(filename), path, value))
    assert errors, f"{path}={value!r} was accepted"
    matching = [e for e in errors if e.startswith(f"{field}: ")]
    assert matching, f"no error names {field}: {errors}"
    assert any(message in e for e in matching), f"{message!r} not in {matching}"


_OWN = "otherwise use a label in your own domain"

# The restricted-label rules as upstream has them today, with the whole error list a user sees.
LABEL_RULES_EXACT = [
    (
        f'{LABELS}["karpenter.sh/team"]',
        "x",
        [
            f"{LABELS}: label domain \"karpenter.sh\" is restricted ('karpenter.sh/team'); "
            f"allowed there: karpenter.sh/capacity-type; {_OWN}"
        ],
    ),
    (
        f'{LABELS}["kubernetes.io/hostname"]',
        "x",
        [
            f'{LABELS}: label "kubernetes.io/hostname" is restricted: every node gets its own hostname'
        ],
    ),
    (
        f'{LABELS}["karpenter.sh/nodepool"]',
        "x",
        [
            f'{LABELS}: label "karpenter.sh/nodepool" is restricted: '
            "Karpenter sets it to the NodePool name"
        ],
    ),
    (f'{LABELS}["kubernetes.io/team"]', "x", []),
    (f'{LABELS}["node-role.kubernetes.io/gpu"]', "", []),
    (f'{LABELS}["example.k8s.io/team"]', "x", []),
    (
        REQ0,
        _req("karpenter.sh/custom", "Exists"),
        [
            f"{REQ0}.key: label domain \"karpenter.sh\" is restricted ('karpenter.sh/custom'); "
            f"allowed there: karpenter.sh/capacity-type, karpenter.sh/nodepool; {_OWN}"
        ],
    ),
    (
        REQ0,
        _req("kubernetes.io/hostname", "Exists"),
        [
            f'{REQ0}.key: label "kubernetes.io/hostname" is restricted: every node gets its own hostname'
        ],
    ),
    (
        REQ0,
        _req("karpenter.sh/nodepool", "In", ["x"]),
        [
            f'{TSPEC}.requirements: requirements[0]: label "karpenter.sh/nodepool" is restricted: '
            "Karpenter sets it to the NodePool name"
        ],
    ),
    (REQ0, _req("kubernetes.io/team", "In", ["a"]), []),
    (REQ0, _req("example.k8s.io/team", "Exists"), []),
]


@pytest.mark.parametrize(("path", "value", "expected"), LABEL_RULES_EXACT)
def test_nodepool_label_rules_exact(path, value, expected):
    assert errors_of(edit(load(NP), path, value)) == expected


@pytest.mark.parametrize(("spec_fields", "message"), STATIC_POOL_CASES)
def test_static_nodepool_rules(spec_fields, message):
    manifest = load(NP)
    for key, value in spec_fields.items():
        manifest = edit(manifest, f"spec.{key}", value)
    errors = errors_of(manifest)
    assert any(e.startswith("spec: ") and message in e for e in errors), errors


def test_static_nodepool_with_only_node_limits_is_valid():
    manifest = edit(load(NP), "spec.limits", {"nodes": 3})
    assert errors_of(edit(manifest, "spec.replicas", 0)) == []


# Close neighbours of the invalid cases above that upstream accepts.
VALID = [
    (NP, REQ0, _req("kubernetes.io/arch", "Exists")),
    (NP, REQ0, _req("kubernetes.io/arch", "DoesNotExist", [])),
    (NP, REQ0, _req("kubernetes.io/arch", "NotIn", [])),
    (NP, REQ0, _req("karpenter.k8s.aws/instance-cpu", "Gt", ["0"])),
    (NP, REQ0, _req("karpenter.k8s.aws/instance-cpu", "Lte", ["128"])),
    (NP, REQ0, _req("kubernetes.io/arch", "In", ["amd64", "arm64"], minValues=2)),
    (NP, REQ0, _req("kubernetes.io/arch", "NotIn", ["amd64"], minValues=5)),
    (NP, REQ0, _req("node.kubernetes.io/instance-type", "In", ["m5.large"])),
    (NP, REQ0, _req("node.kubernetes.io/custom", "Exists")),
    (NP, REQ0, _req("node-restriction.kubernetes.io/team", "Exists")),
    (NP, REQ0, _req("kops.k8s.io/instancegroup", "Exists")),
    (NP, REQ0, _req("beta.kubernetes.io/arch", "In", ["amd64"])),
    (NP, REQ0, _req("karpenter.k8s.aws/instance-family", "In", ["m5"])),
    (NP, REQ0, _req("karpenter.k8s.aws/ec2nodeclass", "In", ["default"])),
    (NP, REQ0, _req("topology.k8s.aws/zone-id", "In", ["usw2-az1"])),
    (NP, REQ0, _req("karpenter.kwok.sh/instance-family", "In", ["c"])),
    (NP, REQ0, _req("example.com/team", "In", [""])),
    (NP, f'{LABELS}["example.com/team"]', "y" * 63),
    (NP, f'{LABELS}["team"]', ""),
    (NP, f'{LABELS}["karpenter.sh/capacity-type"]', "spot"),
    (NP, f'{LABELS}["node.kubernetes.io/role"]', "worker"),
    # Upstream allows the kubernetes.io and k8s.io domains and their sub-domains now.
    (NP, REQ0, _req("example.kubernetes.io/team", "Exists")),
    (NP, REQ0, _req("kubernetes.io/role", "In", ["worker"])),
    (NP, REQ0, _req("k8s.io/team", "Exists")),
    (NC, "spec.requirements[0]", _req("sub.k8s.io/team", "In", ["a"])),
    (NP, f'{LABELS}["kubernetes.io/team"]', "a"),
    (NP, f'{LABELS}["node-role.kubernetes.io/worker"]', ""),
    (NP, f'{LABELS}["example.kubernetes.io/team"]', "a"),
    (NP, f'{LABELS}["k8s.io/team"]', "a"),
    (NP, f'{LABELS}["sub.k8s.io/team"]', "a"),
    (NP, f"{TSPEC}.expireAfter", "Never"),
    (NP, f"{TSPEC}.expireAfter", "1h30m20s"),
    (NP, f"{TSPEC}.terminationGracePeriod", "90s"),
    (NP, f"{DIS}.consolidateAfter", "Never"),
    (NP, f"{DIS}.consolidateAfter", "2562047h"),  # Go's longest whole-hour duration
    (NP, f"{DIS}.consolidationPolicy", "WhenEmpty"),
    (NP, f"{DIS}.budgets", _budget(nodes="100%")),
    (NP, f"{DIS}.budgets", _budget(nodes="0")),
    (NP, f"{DIS}.budgets", _budget(nodes="1", schedule="0 0 * * *", duration="10m")),
    (NP, f"{DIS}.budgets", _budget(nodes="1", schedule="@hourly", duration="1h30m0s")),
    (NP, f"{DIS}.budgets", _budget(nodes="1", reasons=[])),
    (NP, f"{DIS}.budgets", []),
    (
        NP,
        f"{TSPEC}.taints",
        [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}],
    ),
    (
        NP,
        f"{TSPEC}.taints",
        [{"key": "example.com/a", "value": "example.com/b", "effect": "NoSchedule"}],
    ),
    (NP, "spec.weight", 100),
    (NP, "spec.limits", {"cpu": "1.5", "memory": "10Gi", "nodes": 10}),
    (NC, "spec.requirements[0]", _req("karpenter.sh/nodepool", "In", ["default"])),
    (EC2, "spec.amiFamily", "AL2023"),
    (EC2, "spec.amiFamily", "Custom"),
    (EC2, "spec.amiSelectorTerms", [{"alias": "windows2025@latest"}]),
    (EC2, "spec.amiSelectorTerms", [{"alias": "bottlerocket@v1.20.0"}]),
    (EC2, "spec.blockDeviceMappings", [{"ebs": {"volumeSize": "64T"}}]),
    (EC2, "spec.blockDeviceMappings", [{"ebs": {"volumeSize": "1G"}}]),
    (EC2, "spec.tags", {"kubernetes.io/role": "x", "team": "a"}),
    (EC2, "spec.placementGroupSelector", {"id": "pg-0123"}),
    (EC2, "spec.kubelet", {"anything": {"nested": [1, 2]}}),
    (KWOK, "spec.reservedResources", {"cpu": "1", "pid": "100"}),
]


@pytest.mark.parametrize(("filename", "path", "value"), VALID, ids=lambda v: str(v)[:60])
def test_valid_neighbours_are_accepted(filename, path, value):
    assert errors_of(edit(load(filename), path, value)) == []


@pytest.mark.parametrize("filename", [NP, "nodepool_full.yaml", NC, EC2, EC2_FULL, KWOK])
def test_examples_are_valid(filename):
    assert errors_of(load(filename)) == []
