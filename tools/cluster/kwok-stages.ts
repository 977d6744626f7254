// The KWOK stages that stand in for kubelets: nodes become Ready and send heartbeats, pods run and go away.
import { stringify } from "yaml";

/**
 * How often a simulated node refreshes its conditions. The node lease (renewed by KWOK) is what keeps
 * the node Ready for the node lifecycle controller; this refresh exists so that a status write by
 * KWOK happens regularly, which lets tests prove such writes keep capacity patched by others.
 */
export const NODE_HEARTBEAT_INTERVAL_MS = 10_000;

interface Stage {
  apiVersion: "kwok.x-k8s.io/v1alpha1";
  kind: "Stage";
  metadata: { name: string };
  spec: Record<string, unknown>;
}

const readyConditionStatus = '.status.conditions.[] | select( .type == "Ready" ) | .status';

// Only conditions are written, so capacity, allocatable, addresses and nodeInfo stay as created.
const nodeConditionsTemplate = `
{{ $now := Now }}
{{ $since := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- type: {{ .type | Quote }}
  status: {{ .status | Quote }}
  reason: {{ .reason | Quote }}
  message: {{ .message | Quote }}
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $since | Quote }}
{{ end }}
`;

const podRunningTemplate = `
{{ $now := Now }}
conditions:
- type: Initialized
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: PodReadyToStartContainers
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: ContainersReady
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: Ready
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
{{ range .spec.readinessGates }}
- type: {{ .conditionType | Quote }}
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
{{ if eq .restartPolicy "Always" }}
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ else }}
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPsWith .spec.nodeName }}
hostIP: {{ index . 0 | Quote }}
hostIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
`;

export function simulatedKubeletStages(): Stage[] {
  const stage = (name: string, spec: Record<string, unknown>): Stage => ({
    apiVersion: "kwok.x-k8s.io/v1alpha1",
    kind: "Stage",
    metadata: { name },
    spec,
  });
  return [
    stage("dpo-node-ready", {
      resourceRef: { apiGroup: "v1", kind: "Node" },
      selector: { matchExpressions: [{ key: readyConditionStatus, operator: "NotIn", values: ["True"] }] },
      next: { statusTemplate: nodeConditionsTemplate },
    }),
    stage("dpo-node-heartbeat", {
      resourceRef: { apiGroup: "v1", kind: "Node" },
      selector: { matchExpressions: [{ key: readyConditionStatus, operator: "In", values: ["True"] }] },
      delay: {
        durationMilliseconds: NODE_HEARTBEAT_INTERVAL_MS,
        jitterDurationMilliseconds: Math.round(NODE_HEARTBEAT_INTERVAL_MS * 1.2),
      },
      next: { statusTemplate: nodeConditionsTemplate },
      immediateNextStage: true,
    }),
    stage("dpo-pod-running", {
      resourceRef: { apiGroup: "v1", kind: "Pod" },
      selector: {
        matchExpressions: [
          { key: ".metadata.deletionTimestamp", operator: "DoesNotExist" },
          { key: ".status.phase", operator: "In", values: ["Pending"] },
          { key: readyConditionStatus, operator: "NotIn", values: ["True"] },
        ],
      },
      next: { statusTemplate: podRunningTemplate },
    }),
    // Without a kubelet nothing would finish a graceful deletion, so terminating pods go at once.
    stage("dpo-pod-delete", {
      resourceRef: { apiGroup: "v1", kind: "Pod" },
      selector: { matchExpressions: [{ key: ".metadata.deletionTimestamp", operator: "Exists" }] },
      next: { delete: true },
    }),
  ];
}

/** KWOK's --config format: YAML documents, one per object. */
export function renderKwokConfig(stages: Stage[]): string {
  return stages.map((stage) => stringify(stage, { lineWidth: 0 })).join("---\n");
}
