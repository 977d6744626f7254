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
