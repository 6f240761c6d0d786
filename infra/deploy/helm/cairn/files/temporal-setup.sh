#!/bin/sh
# Cairn's needs on a Temporal cluster, idempotent (compose.yaml and the Helm hook both run it, in
# the temporalio/admin-tools image): the namespace, and the custom search attributes the
# workflows set (infra/devstack.py SEARCH_ATTRIBUTES gives them to the dev server). Against an mTLS
# cluster or Temporal Cloud, the `temporal` CLI reads its own variables from the environment:
# TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH,
# TEMPORAL_TLS_SERVER_NAME, TEMPORAL_API_KEY (tests/integration/test_temporal_tls.py).
set -eu
: "${TEMPORAL_ADDRESS:?}"
NAMESPACE=${TEMPORAL_NAMESPACE:-default}
RETENTION=${TEMPORAL_RETENTION:-7d}

until temporal operator cluster health --address "$TEMPORAL_ADDRESS"; do
  echo "waiting for Temporal at $TEMPORAL_ADDRESS"
  sleep 3
done
temporal operator namespace describe -n "$NAMESPACE" --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1 ||
  temporal operator namespace create -n "$NAMESPACE" --retention "$RETENTION" --address "$TEMPORAL_ADDRESS"

# a new namespace reaches the frontend's namespace cache a few seconds after it is registered
until existing=$(temporal operator search-attribute list -n "$NAMESPACE" --address "$TEMPORAL_ADDRESS"); do
  echo "waiting for namespace $NAMESPACE"
  sleep 2
done
for attribute in TeamId TaskType DiaryId AgentId; do
  if printf '%s\n' "$existing" | grep -qw "$attribute"; then
    echo "search attribute $attribute exists"
  else
    temporal operator search-attribute create -n "$NAMESPACE" --address "$TEMPORAL_ADDRESS" \
      --name "$attribute" --type Keyword
  fi
done
