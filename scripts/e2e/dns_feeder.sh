#!/usr/bin/env bash
# The e2e cluster's DNS records (test infrastructure): what CoreDNS's kubernetes plugin would serve
# for headless Services, read from the API's Endpoints every second and written as a hosts file for
# dnsmasq (SIGHUP when it changes). Debian packages no CoreDNS; dnsmasq is Debian's.
#   <hostname>.<service>.<namespace>.svc.<domain>  -> that pod's IP (StatefulSet pods, Job pods
#                                                   with a subdomain), ready or not as published
#   <service>.<namespace>.svc.<domain>             -> every published address
#
#   dns_feeder.sh KUBECTL KUBECONFIG HOSTS_FILE DNSMASQ_PID_FILE DOMAIN
set -euo pipefail
kubectl=$1 kubeconfig=$2 hosts=$3 pidfile=$4 domain=$5
# shellcheck disable=SC2016  # jq's own $variables
filter='.items[] | .metadata.namespace as $ns | .metadata.name as $svc
  | (.subsets // [])[] | ((.addresses // []) + (.notReadyAddresses // []))[]
  | (.ip + " " + $svc + "." + $ns + ".svc." + $domain),
    (select(.hostname) | .ip + " " + .hostname + "." + $svc + "." + $ns + ".svc." + $domain)'
while true; do
  if json=$("$kubectl" --kubeconfig "$kubeconfig" get endpoints --all-namespaces -o json 2>/dev/null); then
    new=$(jq -r --arg domain "$domain" "$filter" <<<"$json" | sort -u)
    if [[ ! -f $hosts || $new != "$(cat "$hosts")" ]]; then
      printf '%s\n' "$new" >"$hosts.new"
      mv "$hosts.new" "$hosts"
      kill -HUP "$(cat "$pidfile")" 2>/dev/null || true
    fi
  fi
  sleep 1
done
