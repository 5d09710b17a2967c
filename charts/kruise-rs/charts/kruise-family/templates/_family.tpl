{{/*
The objects one kruise-rs family runs with, rendered in the family's subchart context by
`{{ include "kruise-family.objects" . }}`. The family's own data:
  .Values.binary            the binary (and object) name, e.g. kruise-cloneset
  files/rbac.yaml           `cluster:` and `namespaced:` PolicyRule lists (what its code calls)
  files/webhooks.yaml       its `kruise-<family> manifests` output (webhook configurations)
Everything else comes from the subchart's values and `global`.
*/}}

{{- define "kruise-family.labels" -}}
{{ include "kruise-family.selectorLabels" . }}
app.kubernetes.io/component: {{ .Chart.Name }}
app.kubernetes.io/part-of: kruise-rs
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "kruise-family.selectorLabels" -}}
app.kubernetes.io/name: {{ .Values.binary }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kruise-family.image" -}}
{{- $global := .Values.global.image | default dict -}}
{{- $repository := .Values.image.repository | default (printf "%s/%s" ($global.registry | default "ghcr.io/kruise-rs") .Values.binary) -}}
{{- $tag := .Values.image.tag | default $global.tag | default .Chart.AppVersion -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end }}

{{- define "kruise-family.serviceName" -}}
{{- printf "%s-service" .Values.binary -}}
{{- end }}

{{- define "kruise-family.featureGates" -}}
{{- $gates := list -}}
{{- with .Values.global.featureGates }}{{ $gates = append $gates . }}{{ end -}}
{{- with .Values.featureGates }}{{ $gates = append $gates . }}{{ end -}}
{{- join "," $gates -}}
{{- end }}

{{- define "kruise-family.objects" -}}
{{- $rbac := .Files.Get "files/rbac.yaml" | fromYaml -}}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Values.binary }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "kruise-family.labels" . | nindent 4 }}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $rbac.cluster }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $.Values.binary }}
  labels:
    {{- include "kruise-family.labels" $ | nindent 4 }}
rules:
  {{- toYaml . | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $.Values.binary }}
  labels:
    {{- include "kruise-family.labels" $ | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $.Values.binary }}
subjects:
  - kind: ServiceAccount
    name: {{ $.Values.binary }}
    namespace: {{ $.Release.Namespace }}
{{- end }}
{{- with $rbac.namespaced }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $.Values.binary }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "kruise-family.labels" $ | nindent 4 }}
rules:
  {{- toYaml . | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $.Values.binary }}
  namespace: {{ $.Release.Namespace }}
  labels:
    {{- include "kruise-family.labels" $ | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $.Values.binary }}
subjects:
  - kind: ServiceAccount
    name: {{ $.Values.binary }}
    namespace: {{ $.Release.Namespace }}
{{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "kruise-family.serviceName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "kruise-family.labels" . | nindent 4 }}
spec:
  selector:
    {{- include "kruise-family.selectorLabels" . | nindent 4 }}
  ports:
    - name: webhook
      port: 443
      targetPort: webhook
      protocol: TCP
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Values.binary }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "kruise-family.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      {{- include "kruise-family.selectorLabels" . | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        {{- include "kruise-family.labels" . | nindent 8 }}
      {{- with .Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ .Values.binary }}
      {{- with .Values.global.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: {{ .Chart.Name }}
          image: {{ include "kruise-family.image" . }}
          imagePullPolicy: {{ .Values.image.pullPolicy | default (.Values.global.image | default dict).pullPolicy | default "IfNotPresent" }}
          args:
            - run
            - --leader-elect=true
            - --leader-elect-namespace=$(POD_NAMESPACE)
            - --metrics-addr=:{{ .Values.ports.metrics }}
            - --health-addr=:{{ .Values.ports.health }}
            - --webhook-port={{ .Values.ports.webhook }}
            - --webhook-service={{ include "kruise-family.serviceName" . }}
            - --webhook-secret={{ .Values.binary }}-certs
            - --log-format={{ .Values.logFormat | default .Values.global.logFormat }}
            - --log-level={{ .Values.logLevel | default .Values.global.logLevel }}
            {{- with (include "kruise-family.featureGates" .) }}
            - --feature-gates={{ . }}
            {{- end }}
            {{- range .Values.extraArgs }}
            - {{ . }}
            {{- end }}
          env:
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
          ports:
            - name: webhook
              containerPort: {{ .Values.ports.webhook }}
              protocol: TCP
            - name: metrics
              containerPort: {{ .Values.ports.metrics }}
              protocol: TCP
            - name: health
              containerPort: {{ .Values.ports.health }}
              protocol: TCP
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            periodSeconds: 10
            failureThreshold: 3
          readinessProbe:
            httpGet:
              path: /readyz
              port: health
            periodSeconds: 5
            failureThreshold: 3
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      affinity:
        {{- if .Values.affinity }}
        {{- toYaml .Values.affinity | nindent 8 }}
        {{- else }}
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    {{- include "kruise-family.selectorLabels" . | nindent 20 }}
        {{- end }}
{{- if gt (int .Values.replicas) 1 }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .Values.binary }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "kruise-family.labels" . | nindent 4 }}
spec:
  minAvailable: 1
  selector:
    matchLabels:
      {{- include "kruise-family.selectorLabels" . | nindent 6 }}
{{- end }}
{{- /* Its webhook configurations as `kruise-<family> manifests` prints them, pointed at
       this release's Service; the binary adds the caBundle at run time (merging). */}}
{{- range $doc := splitList "\n---\n" (printf "\n%s" (.Files.Get "files/webhooks.yaml")) }}
{{- $config := fromYaml $doc }}
{{- if $config }}
{{- range $config.webhooks }}
{{- $_ := set .clientConfig.service "namespace" $.Release.Namespace }}
{{- $_ := set .clientConfig.service "name" (include "kruise-family.serviceName" $) }}
{{- end }}
{{- $_ := set $config.metadata "labels" (merge ($config.metadata.labels | default dict) (include "kruise-family.labels" $ | fromYaml)) }}
---
{{ toYaml $config }}
{{- end }}
{{- end }}
{{- end }}

{{- /* A family's node agent (`<binary> agent`), for a subchart with `agent.*` values: its
       ServiceAccount, a ClusterRole with what its code calls (files/rbac.yaml `agent:`),
       and the DaemonSet, one pod per node, the host's /var/run mounted at /hostvarrun
       where the agent looks for the CRI socket (kruise_cri::socket). */}}
{{- define "kruise-family.agent" -}}
{{- if .Values.agent.enabled }}
{{- $rbac := .Files.Get "files/rbac.yaml" | fromYaml }}
{{- $name := printf "%s-agent" .Values.binary }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "kruise-family.labels" . | nindent 4 }}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "kruise-family.labels" . | nindent 4 }}
rules:
  {{- toYaml $rbac.agent | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "kruise-family.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ .Release.Namespace }}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ $name }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "kruise-family.labels" . | nindent 4 }}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ $name }}
      app.kubernetes.io/instance: {{ .Release.Name }}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 10%
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ $name }}
        app.kubernetes.io/instance: {{ .Release.Name }}
        app.kubernetes.io/component: {{ .Chart.Name }}-agent
        app.kubernetes.io/part-of: kruise-rs
      {{- with .Values.agent.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ $name }}
      {{- with .Values.global.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.agent.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      # The runtime socket belongs to root on the host.
      securityContext:
        runAsUser: 0
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: agent
          image: {{ include "kruise-family.image" . }}
          imagePullPolicy: {{ .Values.image.pullPolicy | default (.Values.global.image | default dict).pullPolicy | default "IfNotPresent" }}
          # The agent's own binary (`<binary> agent` runs the same agent from the whole
          # family's binary, which keeps more of itself resident on every node).
          command:
            - /{{ .Values.binary }}-agent
          args:
            - --log-format={{ .Values.logFormat | default .Values.global.logFormat }}
            - --log-level={{ .Values.logLevel | default .Values.global.logLevel }}
            {{- with .Values.agent.criSocket }}
            - --cri-socket={{ . }}
            {{- end }}
            {{- range .Values.agent.extraArgs }}
            - {{ . }}
            {{- end }}
          env:
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
          resources:
            {{- toYaml .Values.agent.resources | nindent 12 }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: hostvarrun
              mountPath: /hostvarrun
      volumes:
        - name: hostvarrun
          hostPath:
            path: {{ .Values.agent.hostVarRun }}
            type: Directory
      {{- with .Values.agent.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.agent.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
{{- end }}
