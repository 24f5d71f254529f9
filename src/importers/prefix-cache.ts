/**
 * What a server's prefix cache would not recompute, estimated the way coa's teacher estimates it
 * (src/teacher/episode.ts): the longest start a call's context shares with any earlier call's context
 * and reply, as a share of the call's input tokens. One instance per episode.
 */
export class PrefixCache {
  private readonly served: string[] = [];

  cached(context: string, reply: string, tokensIn: number): number {
    let shared = 0;
    for (const s of this.served) {
      const n = Math.min(s.length, context.length);
      let i = 0;
      while (i < n && s.charCodeAt(i) === context.charCodeAt(i)) i++;
      shared = Math.max(shared, i);
    }
    this.served.push(context + reply);
    return Math.round((tokensIn * shared) / (context.length || 1));
  }
}
