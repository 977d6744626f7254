{{/*
Labels Helm adds to every object it renders, beside the labels config/ gives the object: which chart
made it and that Helm manages it. Nothing selects on them.
*/}}
{{- define "dpo.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The operator's image, which the operator also gives plugin DaemonSets that name none (DPO_PLUGIN_IMAGE),
as config/default's replacement copies it.
*/}}
{{- define "dpo.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
The prefix of every object name of the chart (<prefix>-operator, <prefix>-plugin, <prefix>-webhook, ...):
fullnameOverride; else, with nameOverride, <release>-<nameOverride> (the release alone when it holds
nameOverride already), as Helm charts do; else dpo, whatever the release's name: one dpo serves a cluster
(its CRDs are cluster-wide), so its names are config/'s unless asked otherwise. At most 40 characters,
so that every name with its suffix stays a valid Service or object name.
*/}}
{{- define "dpo.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if .Values.nameOverride -}}
{{- if contains .Values.nameOverride .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- else -}}
dpo
{{- end -}}
{{- end }}

{{/*
The operator's ServiceAccount: the chart's (serviceAccount.create) or one the user made, <fullname>-operator
unless serviceAccount.name says otherwise. The operator's Role and ClusterRole bindings name it.
*/}}
{{- define "dpo.serviceAccountName" -}}
{{- default (printf "%s-operator" (include "dpo.fullname" .)) .Values.serviceAccount.name -}}
{{- end }}

{{/*
The names of imagePullSecrets, comma-separated: each item is a Secret's name or, as in a pod spec,
{name: ...}. The operator pods pull with them, and the operator gives them to the plugin pods.
*/}}
{{- define "dpo.imagePullSecretNames" -}}
{{- $names := list -}}
{{- range .Values.imagePullSecrets -}}
{{- if kindIs "string" . -}}
{{- $names = append $names . -}}
{{- else -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- end -}}
{{- join "," $names -}}
{{- end }}

{{/*
The operator's --plugin-pod-defaults: pluginDefaults as JSON, with only the fields that are set; empty
when none is, so the chart's defaults render what config/default renders.
*/}}
{{- define "dpo.pluginPodDefaults" -}}
{{- $defaults := dict -}}
{{- range $key := list "tolerations" "priorityClassName" "labels" "annotations" "resources" -}}
{{- with index $.Values.pluginDefaults $key -}}
{{- $_ := set $defaults $key . -}}
{{- end -}}
{{- end -}}
{{- if $defaults -}}
{{- toJson $defaults -}}
{{- end -}}
{{- end }}

{{/*
kubeletRootDir without a trailing slash; the operator's --kubelet-root-dir is set only when it is not the
kubelet's default.
*/}}
{{- define "dpo.kubeletRootDir" -}}
{{- $dir := .Values.kubeletRootDir | trimSuffix "/" -}}
{{- if ne $dir "/var/lib/kubelet" -}}
{{- $dir -}}
{{- end -}}
{{- end }}
