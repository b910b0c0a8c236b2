// The "Checkpoints" tab of a DAG's and a task instance's page: the jobs their tasks name.
import { Chakra, ErrorLines, Failure, h, JobTable, Loading, useApi } from "./checkpoints-common.js";

export function CheckpointsTab({ dagId, taskId }) {
  const path = `dags/${encodeURIComponent(dagId)}` + (taskId ? `/tasks/${encodeURIComponent(taskId)}` : "");
  const [answer, failure] = useApi(path);
  if (failure) return h(Failure, { text: failure });
  if (!answer) return h(Loading);
  const { Box, Heading, Text } = Chakra;
  return h(
    Box,
    { p: 4, id: "checkpoints-tab" },
    h(Heading, { size: "md", mb: 2, id: "scope" }, answer.scope || "Checkpointed jobs"),
    answer.jobs.length === 0 ? h(Text, { id: "none-found" }, answer.none_found) : h(JobTable, { jobs: answer.jobs }),
    h(ErrorLines, { lines: answer.errors }),
  );
}
