{{/*
Base name of the namespaced objects: fullnameOverride, else the release name ("karpenter" gives the
names of manifests/).
*/}}
{{- define "karpenter.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Name of the RBAC objects: the base name with "-py", so they never take the names an upstream
Karpenter release of the same name uses.
*/}}
{{- define "karpenter.rbacName" -}}
{{- printf "%s-py" (include "karpenter.fullname" . | trunc 60 | trimSuffix "-") -}}
{{- end -}}

{{- define "karpenter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "karpenter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "karpenter.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The pod labels every selector matches. */}}
{{- define "karpenter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object: the selector labels, Helm's bookkeeping, additionalLabels. */}}
{{- define "karpenter.labels" -}}
{{ include "karpenter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.name/namespace/labels/annotations of a namespaced object; pass (list $ name). */}}
{{- define "karpenter.metadata" -}}
{{- $top := index . 0 -}}
name: {{ index . 1 }}
namespace: {{ $top.Release.Namespace }}
{{ include "karpenter.annotationsAndLabels" $top }}
{{- end -}}

{{- define "karpenter.annotationsAndLabels" -}}
labels:
  {{- include "karpenter.labels" . | nindent 2 }}
{{- with .Values.additionalAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The controller image: repository@digest when a digest is given, else repository:tag. */}}
{{- define "karpenter.image" -}}
{{- $image := .Values.controller.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The interruption queue: settings.interruptionQueue or its alias interruptionQueueName. */}}
{{- define "karpenter.interruptionQueue" -}}
{{- $queue := .Values.settings.interruptionQueue -}}
{{- $alias := .Values.settings.interruptionQueueName -}}
{{- if and $queue $alias (ne $queue $alias) -}}
{{- fail (printf "settings.interruptionQueue (%q) and settings.interruptionQueueName (%q, its older name) name different queues: set one" $queue $alias) -}}
{{- end -}}
{{- default $alias $queue -}}
{{- end -}}

{{/* FEATURE_GATES in upstream's order; a gate set to null is left out (the controller's default). */}}
{{- define "karpenter.featureGates" -}}
{{- $gates := .Values.settings.featureGates -}}
{{- $out := list -}}
{{- range $pair := list (list "NodeRepair" "nodeRepair") (list "ReservedCapacity" "reservedCapacity") (list "SpotToSpotConsolidation" "spotToSpotConsolidation") (list "NodeOverlay" "nodeOverlay") (list "StaticCapacity" "staticCapacity") (list "CapacityBuffer" "capacityBuffer") -}}
{{- $value := index $gates (index $pair 1) -}}
{{- if kindIs "bool" $value -}}
{{- $out = append $out (printf "%s=%t" (index $pair 0) $value) -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}
