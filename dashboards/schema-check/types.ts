// Helpers for the generated checks in generated/*.ts.

/** `T` with every string enum replaced by the union of its values, so that plain JSON strings
 *  ("list", "dash") type-check where @grafana/schema declares a TypeScript enum. Optional and
 *  required keys, and excess-property checks, are kept. */
export type Loose<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<Loose<U>>
      : T extends object
        ? { [K in keyof T]: Loose<T[K]> }
        : T;

/** A Prometheus panel query. @grafana/schema does not ship the Prometheus data source's query
 *  type; these are the fields of Grafana's `public/app/plugins/datasource/prometheus` dataquery
 *  schema that dashboards use (anything else is an unknown key and fails the check). */
export interface PromQuery {
  refId: string;
  datasource: { type: 'prometheus'; uid: string };
  expr: string;
  legendFormat?: string;
  range?: boolean;
  instant?: boolean;
  format?: 'time_series' | 'table' | 'heatmap';
  editorMode?: 'code' | 'builder';
  exemplar?: boolean;
  interval?: string;
  intervalFactor?: number;
  hide?: boolean;
}
