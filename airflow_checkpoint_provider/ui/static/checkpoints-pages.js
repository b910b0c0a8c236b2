// The navigation entry's pages: every job under the configured roots, and one job's checkpoint history with its
// restore point, charts and a "take savepoint" button. Durations, sizes and charts come formatted from the API.
import {
  Chakra,
  ErrorLines,
  Failure,
  h,
  HealthBadge,
  JobTable,
  Loading,
  React,
  callApi,
  pageUrl,
  useApi,
} from "./checkpoints-common.js";

// The server's SVG charts draw their text in the page's own colour, light or dark.
const CHART_STYLE = { "& svg text": { fill: "currentColor" }, "& svg": { maxWidth: "100%", height: "auto" } };

// The job a page shows, from the address ("plugin/checkpoints/jobs/<root>/<job>"); null on the job list.
function shownJob() {
  const match = window.location.pathname.match(/\/plugin\/checkpoints\/jobs\/(\d+)\/([^/]+)\/?$/);
  try {
    return match ? { rootIndex: match[1], jobName: decodeURIComponent(match[2]) } : null;
  } catch (error) {
    return null; // a malformed address (a stray "%"): the job list
  }
}

export function JobPages() {
  const job = shownJob();
  return job ? h(JobPage, job) : h(JobList);
}

function JobList() {
  const [answer, failure] = useApi("jobs");
  if (failure) return h(Failure, { text: failure });
  if (!answer) return h(Loading);
  const { Box, Heading, Text } = Chakra;
  const roots = answer.roots.map((root) => `[${root.index}] ${root.url}`).join(", ");
  return h(
    Box,
    { p: 4, id: "checkpoint-jobs" },
    h(Heading, { size: "lg", mb: 2 }, "Checkpoints"),
    answer.roots.length === 0
      ? h(Text, { id: "none-found" }, answer.none_found)
      : h(
          React.Fragment,
          null,
          h(Text, { color: "fg.muted", fontSize: "sm", id: "roots" }, `Roots: ${roots}`),
          h(ErrorLines, { lines: answer.errors }),
          answer.jobs.length === 0
            ? h(Text, { id: "none-found", mt: 2 }, answer.none_found)
            : h(JobTable, { jobs: answer.jobs }),
        ),
  );
}

function HistoryTable({ id, columns, rows }) {
  const { Table } = Chakra;
  const cell = (row, name) =>
    name === "Status"
      ? h(
          Table.Cell,
          { key: name, "data-status": row.Status, color: row.Status.startsWith("damaged") ? "fg.error" : undefined },
          row.Status,
        )
      : h(Table.Cell, { key: name }, row[name]);
  return h(
    Table.Root,
    { size: "sm", variant: "line", id, mb: 6 },
    h(Table.Header, null, h(Table.Row, null, ...columns.map((name) => h(Table.ColumnHeader, { key: name }, name)))),
    h(
      Table.Body,
      null,
      ...rows.map((row) =>
        h(Table.Row, { key: `${row.Id}/${row.Path}`, "data-id": row.Id }, ...columns.map((name) => cell(row, name))),
      ),
    ),
  );
}

function RestorePoint({ point }) {
  const { Box, Code, Text } = Chakra;
  return h(
    Box,
    { my: 2 },
    point.id === null
      ? h(Text, { id: "restore-point", color: "fg.error" }, "Restore from ", h(Code, null, "latest"), " has no valid checkpoint.")
      : h(
          Text,
          { id: "restore-point" },
          "Restore from ",
          h(Code, null, "latest"),
          " would start from ",
          h("b", null, `chk-${point.id}`),
          ` (${point.path}).`,
        ),
    point.damaged.length === 0
      ? null
      : h(
          React.Fragment,
          null,
          h(Text, { mt: 2 }, "Skipped as damaged:"),
          h("ul", { id: "damaged", style: { paddingLeft: "1.5em" } }, ...point.damaged.map((d) => h("li", { key: d.id }, `chk-${d.id}: ${d.reason}`))),
        ),
  );
}

function SavepointAction({ history, rootIndex, onTaken }) {
  const { Box, Button, HStack, Text } = Chakra;
  const [stop, setStop] = React.useState(false);
  const [busy, setBusy] = React.useState(false);
  if (history.live_runs.length === 0) {
    return h(Text, { color: "fg.muted", my: 2 }, "No run holds the lease: savepoints need a running job.");
  }
  const take = () => {
    setBusy(true);
    callApi(`jobs/${rootIndex}/${encodeURIComponent(history.job_name)}/savepoint`, { stop })
      .then((answer) => onTaken(answer.message, false))
      .catch((error) => onTaken(String(error.message || error), true))
      .finally(() => setBusy(false));
  };
  const runs = history.live_runs.map((run) => run.run_key || run.run_id).join(", ");
  return h(
    Box,
    { my: 2 },
    h(Text, null, `Running: ${runs}`),
    history.can_savepoint
      ? h(
          HStack,
          { gap: 3, mt: 2 },
          h(Button, { id: "take-savepoint", size: "sm", onClick: take, loading: busy }, "Take savepoint"),
          h(
            "label",
            null,
            h("input", { id: "stop", type: "checkbox", checked: stop, onChange: (event) => setStop(event.target.checked) }),
            " and stop the job",
          ),
        )
      : null,
  );
}

function JobPage({ rootIndex, jobName }) {
  const [limit, setLimit] = React.useState(null);
  const [version, setVersion] = React.useState(0);
  const [message, setMessage] = React.useState(null);
  const path = `jobs/${rootIndex}/${encodeURIComponent(jobName)}` + (limit ? `?limit=${limit}` : "");
  const [history, failure] = useApi(path, version);
  if (failure) return h(Failure, { text: failure });
  if (!history) return h(Loading);
  const { Box, Button, Heading, Link, Text } = Chakra;
  const shown = history.display;
  const more = Math.min(history.checkpoint_count, history.shown * 10);
  const onTaken = (text, failed) => {
    setMessage({ text, failed });
    setVersion((n) => n + 1);
  };
  return h(
    Box,
    { p: 4, id: "checkpoint-job" },
    h(Link, { href: pageUrl(), colorPalette: "blue", fontSize: "sm" }, "All jobs"),
    h(Heading, { size: "lg", mt: 1 }, history.job_name),
    h(Text, { color: "fg.muted", fontSize: "sm", id: "location" }, history.location),
    h(
      Text,
      { mt: 2 },
      "Health: ",
      h(HealthBadge, { state: history.health.state }),
      ` ${shown.health_age} (window ${shown.health_window}, the health sensor's default rule)`,
    ),
    h(RestorePoint, { point: history.restore_point }),
    message ? h(Text, { id: "message", fontWeight: "bold", color: message.failed ? "fg.error" : undefined }, message.text) : null,
    h(SavepointAction, { history, rootIndex, onTaken }),
    h(Box, { css: CHART_STYLE, mt: 4, dangerouslySetInnerHTML: { __html: shown.history_charts } }),
    shown.partition_charts
      ? h(
          React.Fragment,
          null,
          h(Heading, { size: "md", mt: 4 }, `State of chk-${history.restore_point.id} by partition`),
          h(Box, { css: CHART_STYLE, dangerouslySetInnerHTML: { __html: shown.partition_charts } }),
        )
      : null,
    h(
      Heading,
      { size: "md", mt: 4 },
      "Checkpoints" + (history.shown < history.checkpoint_count ? ` (newest ${history.shown} of ${history.checkpoint_count})` : ""),
    ),
    history.shown < history.checkpoint_count
      ? h(Button, { size: "xs", variant: "outline", my: 2, onClick: () => setLimit(more) }, `Show the newest ${more}`)
      : null,
    h(HistoryTable, { id: "checkpoints", columns: shown.columns, rows: shown.checkpoints }),
    h(Heading, { size: "md" }, "Savepoints"),
    h(HistoryTable, { id: "savepoints", columns: shown.columns, rows: shown.savepoints }),
  );
}
