{{/* The env of one process: its groups' variables, then its own; secretEnv from existingSecret. */}}
{{- define "cairn.env" -}}
{{- $root := .root -}}
{{- $env := dict -}}
{{- $secret := list -}}
{{- range $name := (.spec.envGroups | default list) -}}
{{- $group := index $root.Values.envGroups $name -}}
{{- $env = merge $env ($group.env | default dict) -}}
{{- $secret = concat $secret ($group.secretEnv | default list) -}}
{{- end -}}
{{- $env = merge (deepCopy (.spec.env | default dict)) $env -}}
{{- $secret = concat $secret (.spec.secretEnv | default list) -}}
{{- range $key := keys $env | sortAlpha }}
- name: {{ $key }}
  value: {{ index $env $key | toString | quote }}
{{- end }}
{{- range $key := $secret | uniq }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef:
      name: {{ $root.Values.existingSecret }}
      key: {{ $key }}
{{- end }}
{{- end -}}
