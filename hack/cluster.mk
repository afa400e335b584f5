# Local Kubernetes control plane (issue 3). Included by the top-level Makefile.
#
#   make controlplane    build (or reuse) kube-apiserver, kube-scheduler, kube-controller-manager,
#                        etcd and kwok from Go modules into ~/.cache/karpenter-py/bin/<hash>
#   make cluster-up      start them on 127.0.0.1 and apply manifests/crds; admin kubeconfig in
#                        .cluster/kubeconfig
#   make cluster-status  pids + /readyz
#   make cluster-down    stop every process by pid, remove the temp data (logs stay in .cluster/logs)
#   make kind-up         for machines with Docker: kind cluster + in-cluster kwok + manifests/crds
#   make kind-down
#
# Tests reuse any cluster through KARPY_KUBECONFIG, e.g. after `make kind-up`:
#   KARPY_KUBECONFIG=.cluster/kind-kubeconfig $(PYTHON) -m pytest tests -m cluster

PYTHON ?= .venv/bin/python
KIND ?= kind
KUBECTL ?= kubectl
KIND_CLUSTER ?= karpenter-py
# e.g. kindest/node:v1.37.2 when kind publishes it; empty = kind's default node image.
KIND_NODE_IMAGE ?=
KWOK_VERSION ?= v0.8.0

.PHONY: controlplane cluster-up cluster-down cluster-status cluster-logs kind-up kind-down

controlplane:
	bash hack/controlplane/build.sh

# hack/cluster.py runs on $(PYTHON), the project's venv (`venv` is the top-level Makefile's), so
# these work from a fresh clone; the README's next steps use .venv/bin/karpenter-py anyway.
# cluster-up also applies manifests/crds (as kind-up does), so the controller finds its kinds.
cluster-up: venv controlplane
	$(PYTHON) hack/cluster.py up
	$(PYTHON) hack/apply_crds.py .cluster/kubeconfig

cluster-down: venv
	$(PYTHON) hack/cluster.py down

cluster-status: venv
	$(PYTHON) hack/cluster.py status

cluster-logs: venv
	$(PYTHON) hack/cluster.py logs

# kwok's in-cluster install is the kustomize tree its release manifests (kwok.yaml and
# stage-fast.yaml of the kwok release) are built from, with the image tag pinned the way its
# release script does; the tree comes from the Go module proxy (no other download). The controller manages Nodes annotated
# kwok.x-k8s.io/node=fake, like the local cluster (hack/controlplane/kwok/kwok.yaml).
kind-up:
	@command -v $(KIND) >/dev/null || { echo "kind-up needs '$(KIND)' (and Docker)"; exit 1; }
	@command -v $(KUBECTL) >/dev/null || { echo "kind-up needs '$(KUBECTL)'"; exit 1; }
	mkdir -p .cluster
	$(KIND) create cluster --name $(KIND_CLUSTER) $(if $(KIND_NODE_IMAGE),--image $(KIND_NODE_IMAGE)) \
		--kubeconfig .cluster/kind-kubeconfig --wait 120s
	KWOK_DIR=$$(cd / && GOFLAGS= GOWORK=off go mod download -json sigs.k8s.io/kwok@$(KWOK_VERSION) \
		| python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/kustomize && \
	$(KUBECTL) kustomize $$KWOK_DIR/kwok \
		| sed 's|image: registry.k8s.io/kwok/kwok$$|image: registry.k8s.io/kwok/kwok:$(KWOK_VERSION)|' \
		| $(KUBECTL) --kubeconfig .cluster/kind-kubeconfig apply -f - && \
	$(KUBECTL) --kubeconfig .cluster/kind-kubeconfig apply -k $$KWOK_DIR/stage/fast
	$(KUBECTL) --kubeconfig .cluster/kind-kubeconfig -n kube-system rollout status deployment/kwok-controller --timeout=180s
	$(KUBECTL) --kubeconfig .cluster/kind-kubeconfig apply --server-side -f manifests/crds/
	$(KUBECTL) --kubeconfig .cluster/kind-kubeconfig wait --for=condition=Established crd --all --timeout=60s
	@echo "export KUBECONFIG=$(CURDIR)/.cluster/kind-kubeconfig   # or KARPY_KUBECONFIG for the tests"

kind-down:
	$(KIND) delete cluster --name $(KIND_CLUSTER)
	rm -f .cluster/kind-kubeconfig
