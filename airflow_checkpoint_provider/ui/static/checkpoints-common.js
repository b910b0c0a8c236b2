// What the tab and the job pages share: Airflow's React and Chakra UI (on globalThis, so the pages follow
// Airflow's theme, light or dark), the JSON API's address, and a job's row in a list. Plain JavaScript modules,
// no build step: elements are made with React.createElement. Every URL is relative (to this file, or to the
// UI's base URL), so Airflow served under a path prefix ([api] base_url) works.
export const React = globalThis.React;
export const Chakra = globalThis.ChakraUI;
export const h = React.createElement;

const API = new URL("../api/", import.meta.url);
export const HEALTH_COLORS = { healthy: "green", stalled: "orange", damaged: "red", "no checkpoint": "gray" };
export const JOB_COLUMNS = [
  "Job",
  "Root",
  "Health",
  "Latest valid checkpoint",
  "Completed",
  "Checkpoints",
  "Damaged",
  "Savepoints",
  "Running",
];

// A page of the navigation entry ("plugin/checkpoints" and below), as the UI's router serves it.
export function pageUrl(path = "") {
  return new URL(`plugin/checkpoints${path}`, document.baseURI).href;
}

export function jobPath(job) {
  return `/jobs/${job.root_index}/${encodeURIComponent(job.job_name)}`;
}

// GET (or POST with a JSON body) on the pages' API; the error's text is the API's own "detail".
export async function callApi(path, body) {
  const init = { credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(new URL(path, API), init);
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.detail || `${response.status} ${response.statusText}`);
  return answer;
}

// The answer of one GET, fetched again when `path` or `version` changes: [answer, failure].
export function useApi(path, version = 0) {
  const [state, setState] = React.useState([null, null]);
  React.useEffect(() => {
    let current = true;
    callApi(path)
      .then((answer) => current && setState([answer, null]))
      .catch((error) => current && setState([null, String(error.message || error)]));
    return () => {
      current = false;
    };
  }, [path, version]);
  return state;
}

export function HealthBadge({ state }) {
  return h(Chakra.Badge, { "data-health": state, colorPalette: HEALTH_COLORS[state] || "gray" }, state);
}

export function Failure({ text }) {
  return h(Chakra.Box, { p: 4 }, h(Chakra.Text, { id: "checkpoints-error", color: "fg.error" }, text));
}

export function Loading() {
  return h(Chakra.Box, { p: 4 }, h(Chakra.Spinner, { size: "sm" }));
}

function JobRow({ job }) {
  const { Link, Table } = Chakra;
  return h(
    Table.Row,
    { "data-job": job.job_name },
    h(Table.Cell, null, h(Link, { href: pageUrl(jobPath(job)), colorPalette: "blue" }, job.job_name)),
    h(Table.Cell, null, job.root),
    h(Table.Cell, null, h(HealthBadge, { state: job.health.state })),
    h(Table.Cell, null, job.latest_checkpoint_id === null ? "" : `chk-${job.latest_checkpoint_id}`),
    h(Table.Cell, null, `${job.latest_completed || ""} ${job.health_age}`.trim()),
    h(Table.Cell, null, String(job.retained_checkpoints)),
    h(Table.Cell, null, String(job.damaged_checkpoints)),
    h(Table.Cell, null, String(job.savepoints)),
    h(Table.Cell, null, job.running ? "yes (holds the lease)" : "no"),
  );
}

// A table of jobs, one row each, linking to each job's page.
export function JobTable({ jobs }) {
  const { Table } = Chakra;
  return h(
    Table.Root,
    { size: "sm", variant: "line", id: "jobs" },
    h(Table.Header, null, h(Table.Row, null, ...JOB_COLUMNS.map((name) => h(Table.ColumnHeader, { key: name }, name)))),
    h(Table.Body, null, ...jobs.map((job) => h(JobRow, { key: `${job.root_index}/${job.job_name}`, job }))),
  );
}

export function ErrorLines({ lines }) {
  return h(
    React.Fragment,
    null,
    ...lines.map((line) => h(Chakra.Text, { key: line, color: "fg.error", mt: 2, className: "root-error" }, line)),
  );
}
