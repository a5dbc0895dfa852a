"""Where a server's speculative steps sit among the output tokens of a stream.

vLLM's per-request counts (``per_step_accepted``) leave out the steps that drafted nothing, and a chunk
always holds whole steps: ``align_server_steps`` places the counted steps on the chunk boundaries by
dynamic programming and says how many placements could have gone another way. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["align_server_steps"]


def align_server_steps(chunk_of: Sequence[int], accepted: Sequence[int]) -> tuple[list[tuple[int, int, int]], int]:
    """Place the server's spec steps among the output tokens, honouring chunk boundaries.

    ``chunk_of[i]`` is the chunk index of output token i. Returns the steps after the
    prefill as (start, size, spec index or -1 for a zero-draft step) and the number of
    places where a zero-draft step could have gone either way (0 = the placement is forced).
    The last spec step may be cut short by the end of the output.
    """
    total, count = len(chunk_of), len(accepted)
    if total == 0:
        return [], 0

    def same_chunk(start: int, end: int) -> bool:
        return chunk_of[start] == chunk_of[end - 1]

    # feasible[pos][j]: tokens pos.. can be emitted by spec steps j.. plus zero-draft steps
    feasible = [[False] * (count + 1) for _ in range(total + 1)]
    feasible[total][count] = True
    for pos in range(total - 1, 0, -1):
        row = feasible[pos]
        for j in range(count + 1):
            ok = feasible[pos + 1][j]
            if not ok and j < count:
                end = pos + accepted[j] + 1
                if end <= total:
                    ok = same_chunk(pos, end) and feasible[end][j + 1]
                elif j == count - 1:
                    ok = same_chunk(pos, total)
            row[j] = ok
    if total > 1 and not feasible[1][0]:
        return [], -1
    steps, ambiguous, pos, j = [], 0, 1, 0
    while pos < total:
        spec_ok = False
        if j < count:
            end = min(pos + accepted[j] + 1, total)
            spec_ok = same_chunk(pos, end) and (
                feasible[end][j + 1] if pos + accepted[j] + 1 <= total else j == count - 1
            )
        zero_ok = feasible[pos + 1][j]
        if spec_ok and zero_ok:
            ambiguous += 1
        if spec_ok:
            steps.append((pos, end - pos, j))
            pos, j = end, j + 1
        else:
            steps.append((pos, 1, -1))
            pos += 1
    return steps, ambiguous
