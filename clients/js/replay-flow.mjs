// The sessions helper flow of the official openai npm client (tool
// handlers, finalResult), run once by cmd/toolrelay-fake's
// TestJSClientReplay against `toolrelay-fake -replay` (or, to record the
// cassette it replays, against a recording proxy in front of the fake).
// BASE_URL names the base URL to give the client; the flow prints, as
// one JSON line, the tools it ran and the text of the session's last
// answer. Not a *.test.mjs file: `node --test` (TestOfficialJSClient)
// does not run it.
import OpenAI from 'openai';

const baseURL = process.env.BASE_URL;
if (!baseURL) throw new Error('BASE_URL must name the fake');

const weather = {
  getUserFavoriteCity: () => 'Seattle, WA',
  getCityNickname: ({ location }) => (location === 'Seattle, WA' ? 'The Emerald City' : 'unknown'),
  getCurrentWeatherAtLocation: ({ location }) => (location === 'Seattle, WA' ? '70f' : 'unknown'),
};
const tools = [
  { type: 'function', name: 'getUserFavoriteCity', description: "Gets the user's favorite city.", parameters: { type: 'object', properties: {} } },
  { type: 'function', name: 'getCityNickname', description: "Gets a city's nickname.", parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] } },
  { type: 'function', name: 'getCurrentWeatherAtLocation', description: 'Gets the weather.', parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] } },
];

const client = new OpenAI({ apiKey: 'sk-test', baseURL, maxRetries: 0 });
const agent = await client.beta.agents.create({ model: 'gpt-5', instructions: 'You are a weather bot.', tools });
const calls = [];
const toolHandlers = Object.fromEntries(Object.entries(weather).map(([name, f]) => [name, (args) => { calls.push(name); return f(args); }]));
const stream = await client.beta.agents.sessions.create({
  agent_id: agent.id, environment: { type: 'none' }, stream: true, toolHandlers,
  input: "What's the weather like in my favorite city?",
});
const result = await stream.finalResult();
console.log(JSON.stringify({ calls, result }));
