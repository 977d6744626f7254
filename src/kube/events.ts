// Kubernetes Events (core/v1) for transitions users should see in `kubectl describe` and `kubectl get events`.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { kubeRequest } from "./request.js";

export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export interface EventRecorderOptions {
  /** Who reports (`source.component`, `reportingComponent`), e.g. dpo-operator. */
  component: string;
  /** Which instance reports (`reportingInstance`), e.g. the pod name. */
  instance: string;
  logger: Logger;
}

/**
 * Posts Events without blocking the caller. Events of cluster-scoped objects go to the `default`
 * namespace, where `kubectl describe` looks for them. A failed post is logged, never retried: an Event
 * is a hint, and a status write is the record.
 */
export class EventRecorder {
  private sequence = 0;

  constructor(
    private readonly kc: KubeConfig,
    private readonly opts: EventRecorderOptions,
  ) {}

  record(obj: InvolvedObject, type: "Normal" | "Warning", reason: string, message: string): Promise<void> {
    const namespace = obj.metadata.namespace ?? "default";
    const now = new Date();
    const time = now.toISOString();
    const body = {
      apiVersion: "v1",
      kind: "Event",
      metadata: {
        name: `${obj.metadata.name}.${now.getTime().toString(16)}${(this.sequence++ % 4096).toString(16)}`,
        namespace,
      },
      involvedObject: {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: obj.metadata.name,
        namespace: obj.metadata.namespace,
        uid: obj.metadata.uid,
        resourceVersion: obj.metadata.resourceVersion,
      },
      type,
      reason,
      message: message.slice(0, 1024),
      count: 1,
      firstTimestamp: time,
      lastTimestamp: time,
      source: { component: this.opts.component },
      reportingComponent: this.opts.component,
      reportingInstance: this.opts.instance,
    };
    return kubeRequest(this.kc, {
      method: "POST",
      path: `/api/v1/namespaces/${namespace}/events`,
      body,
    }).then(
      () => undefined,
      (err: unknown) => {
        this.opts.logger.warn(
          { reason, object: obj.metadata.name, err: String(err) },
          "could not record event",
        );
      },
    );
  }
}
