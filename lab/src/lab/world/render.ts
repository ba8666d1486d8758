import { sampleMs } from '../engine/delay.js';
import { type Delay } from '../schema/common.js';
import { type Queryable, QueryError, type Row } from './database.js';
import { type Server } from './service-server.js';

/**
 * The work a server does on a row it got from the database
 * (`servers.missService`: a page rendered from its row), after the query,
 * on the server's workers or cores. One meaning for the simulation and a
 * real run's server: `then` is called once the work is done.
 */
export type Render = (then: () => void) => void;

/** Renders on `server()` (looked up when the work comes: the server exists once its data tier does), each a draw of `missService`. */
export function renderOn(server: () => Server, missService: Delay, random: () => number): Render {
  return (then) => server().render(sampleMs(missService, random), then);
}

/** `row`, handed on once `render`'s work on it is done. */
export function rendered(render: Render, row: Row): Promise<Row> {
  return new Promise<Row>((resolve) => render(() => resolve(row)));
}

/** `way`, each row it returns handed on only after `render`'s work (an error is not rendered). */
export function rendering(way: Queryable, render: Render): Queryable {
  return {
    query: (key, options) => way.query(key, options).then((outcome): Row | QueryError | Promise<Row> => (outcome instanceof QueryError ? outcome : rendered(render, outcome))),
  };
}
