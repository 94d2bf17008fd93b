{{/*
Hand-written helpers of the ferry chart. The objects themselves are generated
from manifests/ by make generate (hack/chartgen); these only compute values.
*/}}

{{/* Labels Helm adds to every object, beside the manifests' own. */}}
{{- define "ferry.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/*
The image of a component: <registry>/<repository>:<tag>, the tag defaulting
to images.tag and then to the chart's appVersion; no registry, no prefix.
Called with (list $ "controllerManager").
*/}}
{{- define "ferry.image" -}}
{{- $root := index . 0 -}}
{{- $image := index $root.Values.images (index . 1) -}}
{{- $tag := $image.tag | default $root.Values.images.tag | default $root.Chart.AppVersion -}}
{{- with $root.Values.images.registry -}}{{ trimSuffix "/" . }}/{{- end -}}
{{ $image.repository }}:{{ $tag }}
{{- end }}

{{/* The cluster ID, required. */}}
{{- define "ferry.clusterID" -}}
{{ required "clusterID is required: this cluster's ID among its peers, a DNS label fixed once recorded (--set clusterID=<id>)" .Values.clusterID }}
{{- end }}
