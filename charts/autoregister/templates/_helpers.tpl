{{/*
The app's name: the chart's, or nameOverride.
*/}}
{{- define "autoregister.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name, as `helm create` makes it: fullnameOverride, else the
release name when it already contains the app's name, else RELEASE-NAME.
*/}}
{{- define "autoregister.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "autoregister.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The labels the Deployment selects its pods by, and every object carries. Only the app's
name: a Deployment's selector cannot change, and deploy/ has always selected by it alone
(one release per namespace, as one Lease per namespace: set nameOverride for a second).
*/}}
{{- define "autoregister.selectorLabels" -}}
app.kubernetes.io/name: {{ include "autoregister.name" . }}
{{- end }}

{{/*
Every object's labels: the selector's, plus commonLabels.
*/}}
{{- define "autoregister.labels" -}}
{{ include "autoregister.selectorLabels" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount the controller runs as.
*/}}
{{- define "autoregister.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "autoregister.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: the ServiceAccount to run as, when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The ConfigMap of APIService manifests the pods mount: the chart's, or manifests.existingConfigMap.
*/}}
{{- define "autoregister.manifestsConfigMap" -}}
{{- default (printf "%s-manifests" (include "autoregister.fullname" .)) .Values.manifests.existingConfigMap }}
{{- end }}

{{/*
The image: repository and digest, else repository and tag (default: the chart's appVersion).
*/}}
{{- define "autoregister.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}
