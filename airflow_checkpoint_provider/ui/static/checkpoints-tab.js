// The "Checkpoints" tab of a DAG's and a task instance's page: a React app plugin, rendered inside Airflow's own
// UI with the React and Chakra UI it shares on globalThis (so it follows Airflow's theme, light or dark). No build
// step: plain JavaScript, elements made with React.createElement. Its data is the checkpoint pages' JSON API,
// found relative to this file, so Airflow served under a path prefix ([api] base_url) works.
const React = globalThis.React;
const { Badge, Box, Heading, Link, Spinner, Table, Text } = globalThis.ChakraUI;
const h = React.createElement;

const API = new URL("../api/", import.meta.url);
const PAGES = new URL("../", import.meta.url);
const HEALTH_COLORS = { healthy: "green", stalled: "orange", damaged: "red", "no checkpoint": "gray" };

function age(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 90) return `${Math.round(seconds)} s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

function JobRow({ job }) {
  const page = new URL(`jobs/${job.root_index}/${encodeURIComponent(job.job_name)}`, PAGES).href;
  const health = job.health.state;
  return h(
    Table.Row,
    { "data-job": job.job_name },
    h(Table.Cell, null, h(Link, { href: page, colorPalette: "blue" }, job.job_name)),
    h(Table.Cell, null, job.root),
    h(
      Table.Cell,
      null,
      h(Badge, { "data-health": health, colorPalette: HEALTH_COLORS[health] || "gray" }, health),
    ),
    h(Table.Cell, null, job.latest_checkpoint_id === null ? "" : `chk-${job.latest_checkpoint_id}`),
    h(Table.Cell, null, `${job.latest_completed || ""} ${age(job.health.age_seconds)}`.trim()),
    h(Table.Cell, null, String(job.retained_checkpoints)),
    h(Table.Cell, null, String(job.damaged_checkpoints)),
    h(Table.Cell, null, String(job.savepoints)),
    h(Table.Cell, null, job.running ? "yes (holds the lease)" : "no"),
  );
}

function CheckpointsTab({ dagId, taskId }) {
  const [answer, setAnswer] = React.useState(null);
  const [failure, setFailure] = React.useState(null);
  React.useEffect(() => {
    const path = `dags/${encodeURIComponent(dagId)}` + (taskId ? `/tasks/${encodeURIComponent(taskId)}` : "");
    let current = true;
    fetch(new URL(path, API), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(async (response) => {
        const body = await response.json().catch(() => ({}));
        if (!response.ok) throw new Error(body.detail || `${response.status} ${response.statusText}`);
        return body;
      })
      .then((body) => current && setAnswer(body))
      .catch((error) => current && setFailure(String(error.message || error)));
    return () => {
      current = false;
    };
  }, [dagId, taskId]);

  if (failure) return h(Box, { p: 4 }, h(Text, { id: "checkpoints-error", color: "fg.error" }, failure));
  if (!answer) return h(Box, { p: 4 }, h(Spinner, { size: "sm" }));
  const header = [
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
  return h(
    Box,
    { p: 4, id: "checkpoints-tab" },
    h(Heading, { size: "md", mb: 2, id: "scope" }, answer.scope || "Checkpointed jobs"),
    answer.jobs.length === 0
      ? h(Text, { id: "none-found" }, answer.none_found)
      : h(
          Table.Root,
          { size: "sm", variant: "line", id: "jobs" },
          h(Table.Header, null, h(Table.Row, null, ...header.map((name) => h(Table.ColumnHeader, { key: name }, name)))),
          h(Table.Body, null, ...answer.jobs.map((job) => h(JobRow, { key: `${job.root_index}/${job.job_name}`, job }))),
        ),
    ...answer.errors.map((line) => h(Text, { key: line, color: "fg.error", mt: 2 }, line)),
  );
}

// Airflow's UI finds a plugin's component under the app's name ("Checkpoints", in plugins.py), else under
// AirflowPlugin: both, so another plugin's bundle loading at the same time cannot take this one's place.
globalThis.Checkpoints = CheckpointsTab;
globalThis.AirflowPlugin = CheckpointsTab;
