"""Well-known labels, annotations, taints and finalizers, named as upstream Karpenter names them.

Upstream keeps these in pkg/apis/v1/labels.go (core) and the AWS provider's pkg/apis/v1/labels.go.
Users write selectors against these exact strings, so they are part of the compatibility promise.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "karpenter.sh"
AWS_GROUP: Final = "karpenter.k8s.aws"
KWOK_GROUP: Final = "karpenter.kwok.sh"

# --- core Kubernetes well-known labels
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_TOPOLOGY_REGION: Final = "topology.kubernetes.io/region"
LABEL_INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
LABEL_ARCH: Final = "kubernetes.io/arch"
LABEL_OS: Final = "kubernetes.io/os"
LABEL_WINDOWS_BUILD: Final = "node.kubernetes.io/windows-build"

# --- karpenter.sh labels
LABEL_NODEPOOL: Final = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
LABEL_NODE_REGISTERED: Final = "karpenter.sh/registered"
LABEL_NODE_INITIALIZED: Final = "karpenter.sh/initialized"
LABEL_DO_NOT_SYNC_TAINTS: Final = "karpenter.sh/do-not-sync-taints"
LABEL_NODE_EXCLUDE_FROM_LB: Final = "node.kubernetes.io/exclude-from-external-load-balancers"

CAPACITY_TYPE_SPOT: Final = "spot"
CAPACITY_TYPE_ON_DEMAND: Final = "on-demand"
CAPACITY_TYPE_RESERVED: Final = "reserved"
CAPACITY_TYPES: Final = (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_RESERVED)

ARCH_AMD64: Final = "amd64"
ARCH_ARM64: Final = "arm64"

# --- karpenter.sh annotations
ANNOTATION_DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
ANNOTATION_NODEPOOL_HASH: Final = "karpenter.sh/nodepool-hash"
ANNOTATION_NODEPOOL_HASH_VERSION: Final = "karpenter.sh/nodepool-hash-version"
NODEPOOL_HASH_VERSION: Final = "v3"
ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: Final = "karpenter.sh/nodeclaim-termination-timestamp"
ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: Final = "karpenter.sh/nodeclaim-min-values-relaxed"
# "true" on a NodeClaim some of whose instance types a NodeOverlay priced / gave capacity.
ANNOTATION_PRICE_OVERLAY_APPLIED: Final = "karpenter.sh/price-overlay-applied"
ANNOTATION_CAPACITY_OVERLAY_APPLIED: Final = "karpenter.sh/capacity-overlay-applied"
ANNOTATION_COMPATIBILITY_PROVIDER: Final = "compatibility.karpenter.sh/provider"

# --- taints
TAINT_DISRUPTED_KEY: Final = "karpenter.sh/disrupted"
TAINT_UNREGISTERED_KEY: Final = "karpenter.sh/unregistered"

# Taints that nodes carry while they boot; ignored on uninitialized managed nodes (pkg/scheduling/taints.go).
TAINT_NODE_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE: Final = "node.kubernetes.io/unreachable"
TAINT_EXTERNAL_CLOUD_PROVIDER: Final = "node.cloudprovider.kubernetes.io/uninitialized"
EPHEMERAL_TAINT_PREFIXES: Final = ("readiness.k8s.io/",)

# --- finalizers
FINALIZER_TERMINATION: Final = "karpenter.sh/termination"
AWS_FINALIZER_TERMINATION: Final = "karpenter.k8s.aws/termination"

# --- AWS provider labels (karpenter.k8s.aws/*)
AWS_LABEL_INSTANCE_CATEGORY: Final = "karpenter.k8s.aws/instance-category"
AWS_LABEL_INSTANCE_FAMILY: Final = "karpenter.k8s.aws/instance-family"
AWS_LABEL_INSTANCE_GENERATION: Final = "karpenter.k8s.aws/instance-generation"
AWS_LABEL_INSTANCE_SIZE: Final = "karpenter.k8s.aws/instance-size"
AWS_LABEL_INSTANCE_CPU: Final = "karpenter.k8s.aws/instance-cpu"
AWS_LABEL_INSTANCE_CPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-cpu-manufacturer"
AWS_LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: Final = (
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
)
AWS_LABEL_INSTANCE_MEMORY: Final = "karpenter.k8s.aws/instance-memory"
AWS_LABEL_INSTANCE_EBS_BANDWIDTH: Final = "karpenter.k8s.aws/instance-ebs-bandwidth"
AWS_LABEL_INSTANCE_NETWORK_BANDWIDTH: Final = "karpenter.k8s.aws/instance-network-bandwidth"
AWS_LABEL_INSTANCE_GPU_NAME: Final = "karpenter.k8s.aws/instance-gpu-name"
AWS_LABEL_INSTANCE_GPU_MANUFACTURER: Final = "karpenter.k8s.aws/instance-gpu-manufacturer"
AWS_LABEL_INSTANCE_GPU_COUNT: Final = "karpenter.k8s.aws/instance-gpu-count"
AWS_LABEL_INSTANCE_GPU_MEMORY: Final = "karpenter.k8s.aws/instance-gpu-memory"
AWS_LABEL_INSTANCE_ACCELERATOR_NAME: Final = "karpenter.k8s.aws/instance-accelerator-name"
AWS_LABEL_INSTANCE_ACCELERATOR_MANUFACTURER: Final = (
    "karpenter.k8s.aws/instance-accelerator-manufacturer"
)
AWS_LABEL_INSTANCE_ACCELERATOR_COUNT: Final = "karpenter.k8s.aws/instance-accelerator-count"
AWS_LABEL_INSTANCE_LOCAL_NVME: Final = "karpenter.k8s.aws/instance-local-nvme"
AWS_LABEL_INSTANCE_HYPERVISOR: Final = "karpenter.k8s.aws/instance-hypervisor"
AWS_LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT: Final = (
    "karpenter.k8s.aws/instance-encryption-in-transit-supported"
)
AWS_LABEL_INSTANCE_CAPABILITY_FLEX: Final = "karpenter.k8s.aws/instance-capability-flex"
AWS_LABEL_INSTANCE_TENANCY: Final = "karpenter.k8s.aws/instance-tenancy"
AWS_LABEL_NITRO_SANDBOX: Final = "karpenter.k8s.aws/nitro-sandbox"
AWS_LABEL_CAPACITY_RESERVATION_ID: Final = "karpenter.k8s.aws/capacity-reservation-id"
AWS_LABEL_CAPACITY_RESERVATION_TYPE: Final = "karpenter.k8s.aws/capacity-reservation-type"
AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: Final = (
    "karpenter.k8s.aws/capacity-reservation-interruptible"
)
AWS_LABEL_PLACEMENT_GROUP_ID: Final = "karpenter.k8s.aws/placement-group-id"
AWS_LABEL_PLACEMENT_GROUP_PARTITION: Final = "karpenter.k8s.aws/placement-group-partition"
AWS_LABEL_TOPOLOGY_ZONE_ID: Final = "topology.k8s.aws/zone-id"
AWS_LABEL_EC2NODECLASS: Final = "karpenter.k8s.aws/ec2nodeclass"
AWS_ANNOTATION_EC2NODECLASS_HASH: Final = "karpenter.k8s.aws/ec2nodeclass-hash"
AWS_ANNOTATION_EC2NODECLASS_HASH_VERSION: Final = "karpenter.k8s.aws/ec2nodeclass-hash-version"
# Set by the v1beta1 conversion on a class that was amiFamily Ubuntu: what it changed, comma-
# separated (amiFamily, blockDeviceMappings, and "incompatible" when it had no AMI terms).
AWS_ANNOTATION_UBUNTU_COMPATIBILITY: Final = "compatibility.karpenter.k8s.aws/v1beta1-ubuntu"
UBUNTU_INCOMPATIBLE: Final = "incompatible"
# --- AWS resource tags Karpenter writes (instances, volumes, fleets, templates, profiles)
TAG_EKS_CLUSTER_NAME: Final = "eks:eks-cluster-name"
TAG_NODECLAIM: Final = "karpenter.sh/nodeclaim"
TAG_NAME: Final = "Name"
AWS_TAG_CLUSTER: Final = "karpenter.k8s.aws/cluster"

# --- KWOK provider labels
KWOK_LABEL_INSTANCE_SIZE: Final = "karpenter.kwok.sh/instance-size"
KWOK_LABEL_INSTANCE_FAMILY: Final = "karpenter.kwok.sh/instance-family"
KWOK_LABEL_INSTANCE_CPU: Final = "karpenter.kwok.sh/instance-cpu"
KWOK_LABEL_INSTANCE_MEMORY: Final = "karpenter.kwok.sh/instance-memory"
KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
# Hash of the KWOKNodeClass spec a node was launched with (the kwok twin of AWS's
# karpenter.k8s.aws/ec2nodeclass-hash); a different current hash is drift (NodeClassDrifted).
KWOK_ANNOTATION_KWOKNODECLASS_HASH: Final = "karpenter.kwok.sh/kwoknodeclass-hash"
KWOK_ANNOTATION_KWOKNODECLASS_HASH_VERSION: Final = "karpenter.kwok.sh/kwoknodeclass-hash-version"
KWOKNODECLASS_HASH_VERSION: Final = "v1"
KWOK_PARTITION_LABEL: Final = "kwok-partition"

# --- well-known resources
RESOURCE_CPU: Final = "cpu"
RESOURCE_MEMORY: Final = "memory"
RESOURCE_PODS: Final = "pods"
RESOURCE_EPHEMERAL_STORAGE: Final = "ephemeral-storage"
RESOURCE_NVIDIA_GPU: Final = "nvidia.com/gpu"
RESOURCE_AMD_GPU: Final = "amd.com/gpu"
RESOURCE_AWS_NEURON: Final = "aws.amazon.com/neuron"
RESOURCE_AWS_NEURON_CORE: Final = "aws.amazon.com/neuroncore"
RESOURCE_HABANA_GAUDI: Final = "habana.ai/gaudi"
RESOURCE_AWS_POD_ENI: Final = "vpc.amazonaws.com/pod-eni"
RESOURCE_EFA: Final = "vpc.amazonaws.com/efa"
RESOURCE_PRIVATE_IPV4: Final = "vpc.amazonaws.com/PrivateIPv4Address"

# Labels whose values Karpenter knows for every instance type even when no requirement names them
# ("well-known"): a pod may select on them and still be schedulable (pkg/apis/v1/labels.go).
WELL_KNOWN_LABELS: Final = frozenset(
    {
        LABEL_NODEPOOL,
        LABEL_TOPOLOGY_ZONE,
        LABEL_TOPOLOGY_REGION,
        LABEL_INSTANCE_TYPE,
        LABEL_ARCH,
        LABEL_OS,
        LABEL_CAPACITY_TYPE,
        LABEL_WINDOWS_BUILD,
        AWS_LABEL_INSTANCE_CATEGORY,
        AWS_LABEL_INSTANCE_FAMILY,
        AWS_LABEL_INSTANCE_GENERATION,
        AWS_LABEL_INSTANCE_SIZE,
        AWS_LABEL_INSTANCE_CPU,
        AWS_LABEL_INSTANCE_CPU_MANUFACTURER,
        AWS_LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        AWS_LABEL_INSTANCE_MEMORY,
        AWS_LABEL_INSTANCE_EBS_BANDWIDTH,
        AWS_LABEL_INSTANCE_NETWORK_BANDWIDTH,
        AWS_LABEL_INSTANCE_GPU_NAME,
        AWS_LABEL_INSTANCE_GPU_MANUFACTURER,
        AWS_LABEL_INSTANCE_GPU_COUNT,
        AWS_LABEL_INSTANCE_GPU_MEMORY,
        AWS_LABEL_INSTANCE_ACCELERATOR_NAME,
        AWS_LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
        AWS_LABEL_INSTANCE_ACCELERATOR_COUNT,
        AWS_LABEL_INSTANCE_LOCAL_NVME,
        AWS_LABEL_INSTANCE_HYPERVISOR,
        AWS_LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT,
        AWS_LABEL_INSTANCE_CAPABILITY_FLEX,
        AWS_LABEL_INSTANCE_TENANCY,
        AWS_LABEL_NITRO_SANDBOX,
        AWS_LABEL_TOPOLOGY_ZONE_ID,
        AWS_LABEL_CAPACITY_RESERVATION_ID,
        AWS_LABEL_CAPACITY_RESERVATION_TYPE,
        AWS_LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
        KWOK_LABEL_INSTANCE_SIZE,
        KWOK_LABEL_INSTANCE_FAMILY,
        KWOK_LABEL_INSTANCE_CPU,
        KWOK_LABEL_INSTANCE_MEMORY,
    }
)

# Domains users may not set labels/requirements in (NodePool CEL + runtime validation), apart
# from the well-known keys there. Upstream used to restrict kubernetes.io and k8s.io (and their
# sub-domains) too; it no longer does, so e.g. node-role.kubernetes.io/worker or
# example.k8s.io/team may be NodePool labels. Labels the kubelet may not set on its own Node are
# applied after registration (cloudprovider/aws/userdata.py decides which go on --node-labels).
RESTRICTED_LABEL_DOMAINS: Final = ("karpenter.sh",)
RESTRICTED_LABELS: Final = frozenset({LABEL_NODEPOOL, LABEL_HOSTNAME})

# Beta labels normalised to their GA names in requirements (pkg/apis/v1/labels.go NormalizedLabels).
NORMALIZED_LABELS: Final = {
    "failure-domain.beta.kubernetes.io/zone": LABEL_TOPOLOGY_ZONE,
    "failure-domain.beta.kubernetes.io/region": LABEL_TOPOLOGY_REGION,
    "beta.kubernetes.io/arch": LABEL_ARCH,
    "beta.kubernetes.io/os": LABEL_OS,
    "beta.kubernetes.io/instance-type": LABEL_INSTANCE_TYPE,
    # Older EBS CSI volumes pin their zone with the driver's own key.
    "topology.ebs.csi.aws.com/zone": LABEL_TOPOLOGY_ZONE,
}

# Pod priority classes treated as critical when draining (drained last).
CRITICAL_PRIORITY_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})
