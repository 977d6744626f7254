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
The operator's ServiceAccount: the chart's (serviceAccount.create) or one the user made, dpo-operator
unless serviceAccount.name says otherwise. The operator's Role and ClusterRole bindings name it.
*/}}
{{- define "dpo.serviceAccountName" -}}
{{- default "dpo-operator" .Values.serviceAccount.name -}}
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
