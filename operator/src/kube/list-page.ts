// A page of an API server list: what the informers (controller/informer.ts) and the gateways
// that list by page (schedule-gateway.ts) send. Here, in kube/, so gateways need nothing of the
// controller's.

/** Which page of a list to send: the API server's `limit` and `continue`. */
export interface ListPage {
  limit: number;
  continue?: string;
}

/** The page as client-node's list calls take it (its generated clients name the token `_continue`). */
export const clientNodePage = ({ limit, continue: token }: ListPage): { limit: number; _continue?: string } => ({
  limit,
  ...(token ? { _continue: token } : {}),
});
