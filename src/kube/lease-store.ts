// The LeaseStore of leader election over a real coordination.k8s.io/v1 Lease, through client-node's
// CoordinationV1Api (not counted among the operator's API requests: renewals are not work).
import {
  CoordinationV1Api,
  Observable,
  V1MicroTime,
  type ConfigurationOptions,
  type KubeConfig,
  type ObservableMiddleware,
  type V1Lease,
} from "@kubernetes/client-node";
import { isNotFound, toKubeError } from "./errors.js";
import type { LeaseRecord, LeaseStore, StoredLease } from "./leader.js";

/** Per-call options that hand `signal` to the request, so an abandoned lease attempt never arrives late. */
function cancelledBy(
  signal: AbortSignal | undefined,
): ConfigurationOptions<ObservableMiddleware> | undefined {
  if (signal === undefined) return undefined;
  return {
    middleware: [
      {
        pre: (context) => {
          context.setSignal(signal);
          return new Observable(Promise.resolve(context));
        },
        post: (response) => new Observable(Promise.resolve(response)),
      },
    ],
    middlewareMergeStrategy: "append",
  };
}

/** The Lease `namespace/name` through client-node's CoordinationV1Api; `signal` cancels a request. */
export function kubeLeaseStore(kc: KubeConfig, lease: { namespace: string; name: string }): LeaseStore {
  const api = kc.makeApiClient(CoordinationV1Api);
  const { namespace, name } = lease;
  const toLease = (record: LeaseRecord, resourceVersion?: string): V1Lease => ({
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name, namespace, ...(resourceVersion === undefined ? {} : { resourceVersion }) },
    spec: {
      holderIdentity: record.holderIdentity,
      leaseDurationSeconds: record.leaseDurationSeconds,
      leaseTransitions: record.leaseTransitions,
      // MicroTime must carry six fractional digits or the API server refuses it; V1MicroTime prints them.
      ...(record.acquireTime === undefined ? {} : { acquireTime: new V1MicroTime(record.acquireTime) }),
      ...(record.renewTime === undefined ? {} : { renewTime: new V1MicroTime(record.renewTime) }),
    },
  });
  return {
    description: `${namespace}/${name}`,
    async get(signal) {
      try {
        return fromLease(await api.readNamespacedLease({ name, namespace }, cancelledBy(signal)));
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw toKubeError(err);
      }
    },
    async create(record, signal) {
      try {
        return fromLease(
          await api.createNamespacedLease({ namespace, body: toLease(record) }, cancelledBy(signal)),
        );
      } catch (err) {
        throw toKubeError(err);
      }
    },
    async update(record, resourceVersion, signal) {
      try {
        return fromLease(
          await api.replaceNamespacedLease(
            { name, namespace, body: toLease(record, resourceVersion) },
            cancelledBy(signal),
          ),
        );
      } catch (err) {
        throw toKubeError(err);
      }
    },
  };
}

function fromLease(lease: V1Lease): StoredLease {
  const spec = lease.spec ?? {};
  return {
    resourceVersion: lease.metadata?.resourceVersion ?? "",
    record: {
      holderIdentity: spec.holderIdentity ?? "",
      leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
      leaseTransitions: spec.leaseTransitions ?? 0,
      acquireTime: toMillis(spec.acquireTime),
      renewTime: toMillis(spec.renewTime),
    },
  };
}

/** client-node leaves MicroTime as the wire string when reading, though its type says Date. */
function toMillis(value: Date | string | undefined): number | undefined {
  if (value === undefined || value === null) return undefined;
  const millis = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isNaN(millis) ? undefined : millis;
}
